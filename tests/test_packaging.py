"""The wheel runs outside the checkout: every package is in it (sub-packages and data files included),
and the installed `mgbench` entry point starts. Built from a clean copy of the tracked files and
installed, not editable, into a fresh venv that sees this interpreter's dependencies only."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """bin/ of a fresh venv with the wheel of a clean copy of the tree installed."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to copy the tracked files from")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    files = _run(["git", "ls-files", "-z"], ROOT).stdout.split("\0")
    for rel in filter(None, files):
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                  str(tmp / "dist"), str(src)], tmp)
    assert built.returncode == 0, built.stderr[-2000:]
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(tmp / "venv")
    bin_dir = tmp / "venv" / ("Scripts" if os.name == "nt" else "bin")
    wheel = next((tmp / "dist").glob("mgbench-*.whl"))
    inst = _run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install", "--no-deps",
                 "--no-index", "-q", str(wheel)], tmp)
    assert inst.returncode == 0, inst.stderr[-2000:]
    return bin_dir


def test_installed_packages_come_from_the_wheel(installed, tmp_path):
    code = ("import generator, scrapers.harness, validation.eval, taxonomy, templates, dataset, sys;"
            "from taxonomy import load_taxonomy; t = load_taxonomy(); print(generator.__file__, len(t.families))")
    proc = _run([str(installed / "python"), "-c", code], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    path, families = proc.stdout.split()
    assert str(installed.parent) in path and int(families) > 0


def test_installed_cli_starts(installed, tmp_path):
    for args in (["--help"], ["build", "--help"], ["scrape", "harness", "--help"]):
        proc = _run([str(installed / "mgbench"), *args], tmp_path)
        assert proc.returncode == 0, (args, proc.stderr[-2000:])
        assert "usage: mgbench" in proc.stdout
