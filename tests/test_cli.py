"""The `mgbench` command line: every stage's commands are wired in one table, a missing stage module is
an error (not a command that silently disappears), and `--help` needs none of the heavy dependencies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Runs argv[2:] as `mgbench ...` in a child whose imports of the top-level names in argv[1] (comma
# separated; a dotted name hides that module only) fail as if they were not installed.
WITHOUT = """
import importlib.abc, sys
HIDDEN = set(sys.argv[1].split(","))
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in HIDDEN or name.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Hide())
from mgbench.cli import main
sys.exit(main(sys.argv[2:]))
"""

# Dependencies that only some handlers use: `mgbench --help` must start without any of them.
HEAVY = (
    "torch",
    "datasets",
    "huggingface_hub",
    "pyarrow",
    "matplotlib",
    "libcst",
    "github",
    "inspect_ai",
    "ray",
    "submitit",
)


def _mgbench_without(hidden: tuple[str, ...], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT, ",".join(hidden), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_every_stage_adds_its_commands():
    from mgbench.cli import STAGES, build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(STAGES) == {"generator", "validation", "eval", "dataset", "scrapers", "taxonomy"}
    assert {"generate", "build", "validate", "eval", "score", "publish", "scrape", "taxonomy"} <= set(sub.choices)


@pytest.mark.parametrize("args", [["--help"], ["build", "--help"], ["scrape", "harness", "--help"]])
def test_help_starts_without_the_heavy_dependencies(args):
    proc = _mgbench_without(HEAVY, *args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage: mgbench")


def test_a_missing_stage_module_is_an_import_error():
    proc = _mgbench_without(("mgbench.dataset.commands",), "--help")
    assert proc.returncode != 0
    assert "ModuleNotFoundError: No module named 'mgbench.dataset.commands'" in proc.stderr
