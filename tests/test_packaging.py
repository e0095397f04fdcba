"""The wheel runs outside the checkout: every package and data file of the tree is in it, and the installed
`mgbench` entry point starts. Built from a clean copy of the tracked files and installed, not editable
and offline (--no-deps --no-index), into a fresh venv without site packages: the only other things that
venv sees are the few libraries `mgbench --help` needs (HELP_DEPS, linked from this interpreter), so a
package left out of the wheel cannot be found anywhere else (an editable install of the checkout in
this interpreter's site packages included)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from mgbench.paths import STAGES

ROOT = Path(__file__).resolve().parent.parent
# Top-level folders that are installed, and the name each installs under (pyproject's package-dir).
INSTALLED = {stage: f"mgbench/{stage}" for stage in STAGES} | {"mgbench": "mgbench"}
SHIPPED_SUFFIXES = (".py", ".j2", ".yaml")
# What `mgbench --help` imports outside the standard library (jinja2 and yaml through the generator and
# taxonomy packages); everything heavier is imported inside the handlers that need it.
HELP_DEPS = ("jinja2", "markupsafe", "yaml")


def _run(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _tracked(root: Path) -> list[str]:
    return [rel for rel in _run(["git", "ls-files", "-z"], root).stdout.split("\0") if rel]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of a clean copy of the tracked files."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to copy the tracked files from")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    for rel in _tracked(ROOT):
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    built = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp / "dist"),
            str(src),
        ],
        tmp,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    return next((tmp / "dist").glob("mgbench-*.whl"))


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """bin/ of a fresh venv (no site packages) with the wheel installed and HELP_DEPS linked in."""
    tmp = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(tmp / "venv")
    bin_dir = tmp / "venv" / ("Scripts" if os.name == "nt" else "bin")
    inst = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(bin_dir / "python"),
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            str(wheel),
        ],
        tmp,
    )
    assert inst.returncode == 0, inst.stderr[-2000:]
    deps = tmp / "help-deps"
    deps.mkdir()
    for name in HELP_DEPS:
        spec = importlib.util.find_spec(name)
        assert spec and spec.submodule_search_locations, f"{name} is not installed here"
        (deps / name).symlink_to(list(spec.submodule_search_locations)[0], target_is_directory=True)
    purelib = _run(
        [str(bin_dir / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tmp
    ).stdout.strip()
    (Path(purelib) / "mgbench-test-help-deps.pth").write_text(f"{deps}\n")
    return bin_dir


def _installed_name(rel: str) -> str:
    """Where a tracked file of an installed folder lands in the wheel."""
    top, _, rest = rel.partition("/")
    return f"{INSTALLED[top]}/{rest}"


def test_wheel_holds_every_module_and_data_file_of_the_tree_under_one_name(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = [rel for rel in _tracked(ROOT) if rel.split("/")[0] in INSTALLED and rel.endswith(SHIPPED_SUFFIXES)]
    assert len(tracked) > 100
    assert [rel for rel in tracked if _installed_name(rel) not in names] == []
    tops = {name.split("/")[0] for name in names}
    assert tops == {"mgbench", next(n.split("/")[0] for n in names if ".dist-info/" in n)}


def test_pyproject_lists_every_package_of_the_tree():
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {
        str(Path(_installed_name(rel)).parent).replace("/", ".")
        for rel in _tracked(ROOT)
        if rel.split("/")[0] in INSTALLED and rel.endswith("/__init__.py")
    }
    assert listed == on_disk


def test_installed_packages_come_from_the_wheel(installed, tmp_path):
    # every package of the tree imports from the venv; this interpreter's site packages come last on the
    # path (for torch, libcst, ...) and their .pth hooks (an editable install of the checkout) stay off
    packages = sorted(
        {
            str(Path(_installed_name(rel)).parent).replace("/", ".")
            for rel in _tracked(ROOT)
            if rel.split("/")[0] in INSTALLED and rel.endswith("/__init__.py")
        }
    )
    assert "mgbench.scrapers.harness" in packages and "mgbench.validation.eval" in packages
    code = (
        f"import importlib, sys; sys.path += {site.getsitepackages()!r}\n"
        f"for name in {packages!r}:\n"
        "    print(name, importlib.import_module(name).__file__)\n"
        "from mgbench.taxonomy import load_taxonomy; print('families', len(load_taxonomy().families))"
    )
    proc = _run([str(installed / "python"), "-c", code], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    *modules, families = [line.split() for line in proc.stdout.splitlines()]
    assert [name for name, path in modules if not path.startswith(str(installed.parent))] == []
    assert len(modules) == len(packages) and int(families[1]) > 0


@pytest.mark.parametrize("args", [["--help"], ["build", "--help"], ["eval", "--help"], ["scrape", "harness", "--help"]])
def test_installed_cli_starts(installed, tmp_path, args):
    proc = _run([str(installed / "mgbench"), *args], tmp_path)
    assert proc.returncode == 0, (args, proc.stderr[-2000:])
    assert proc.stdout.startswith("usage: mgbench")


# Two distributions of the package index whose names were once mgbench's folder names, as local stand-ins:
# each module, and the function of it that its users call.
STAND_INS = {
    "dataset": "def connect(url):\n    return f'dataset stand-in connected to {url}'\n",
    "taxonomy": "def load_taxonomy():\n    return 'taxonomy stand-in'\n",
}
STAND_IN_CHECK = (
    "import dataset, taxonomy\n"
    "print(dataset.connect('sqlite://'), '|', taxonomy.load_taxonomy())\n"
    "assert dataset.__file__ and 'mgbench' not in dataset.__file__ and 'mgbench' not in taxonomy.__file__\n"
)
STAND_IN_OUTPUT = "dataset stand-in connected to sqlite:// | taxonomy stand-in"


def _stand_in_wheel(name: str, tmp: Path) -> Path:
    src = tmp / f"{name}-src"
    (src / name).mkdir(parents=True)
    (src / name / "__init__.py").write_text(STAND_INS[name])
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{name}"\nversion = "1.0"\n[tool.setuptools]\npackages = ["{name}"]\n'
    )
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp), str(src)],
        tmp,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    return next(tmp.glob(f"{name}-1.0-*.whl"))


def _pip(bin_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), *args], bin_dir)


def test_installing_and_uninstalling_mgbench_leaves_other_distributions_alone(wheel, tmp_path):
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(tmp_path / "venv")
    bin_dir = tmp_path / "venv" / "bin"
    stand_ins = [_stand_in_wheel(name, tmp_path) for name in STAND_INS]
    assert _pip(bin_dir, "install", "--no-deps", "--no-index", "-q", *map(str, stand_ins)).returncode == 0
    assert _pip(bin_dir, "install", "--no-deps", "--no-index", "-q", str(wheel)).returncode == 0

    beside = _run([str(bin_dir / "python"), "-c", STAND_IN_CHECK], tmp_path)
    assert beside.returncode == 0, beside.stderr[-2000:]
    assert beside.stdout.strip() == STAND_IN_OUTPUT

    assert _pip(bin_dir, "uninstall", "-y", "-q", "mgbench").returncode == 0
    after = _run([str(bin_dir / "python"), "-c", STAND_IN_CHECK], tmp_path)
    assert after.returncode == 0, after.stderr[-2000:]
    assert after.stdout.strip() == STAND_IN_OUTPUT
    listed = _pip(bin_dir, "list", "--format", "freeze").stdout.split()
    assert {"dataset==1.0", "taxonomy==1.0"} <= set(listed) and not any(n.startswith("mgbench") for n in listed)


def test_a_users_dataset_py_does_not_shadow_the_api(installed, tmp_path):
    # a user's own dataset.py (and taxonomy.py) in the working folder, which sys.path[0] puts first
    (tmp_path / "dataset.py").write_text("raise SystemExit('the user dataset.py was imported')\n")
    (tmp_path / "taxonomy.py").write_text("raise SystemExit('the user taxonomy.py was imported')\n")
    code = (
        f"import sys; sys.path += {site.getsitepackages()!r}\n"
        "from mgbench.dataset.loader import load_tasks\n"
        "from mgbench.taxonomy import load_taxonomy\n"
        "print(load_tasks.__module__, len(load_taxonomy().families) > 0)"
    )
    proc = _run([str(installed / "python"), "-c", code], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert proc.stdout.split() == ["mgbench.dataset.loader", "True"]
