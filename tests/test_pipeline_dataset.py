"""`mgbench build` end to end: a loadable dataset whose rows exec into contract modules."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("build")
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mgbench.cli",
            "build",
            "--out",
            str(out),
            "--level",
            "1",
            "--level",
            "2",
            "--dtype",
            "bf16",
            "--dtype",
            "fp32",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out, proc.stdout


def test_build_prints_folder_and_load_line(built):
    out, stdout = built
    assert "dataset folder:" in stdout and "load_dataset(" in stdout
    assert "passed" in stdout


def test_load_dataset_rows_exec_into_contract_modules(built, monkeypatch):
    import datasets

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out, _ = built
    ds = datasets.load_dataset(str(out / "dataset"))
    rows = [r for split in ds.values() for r in split]
    assert len(rows) >= 30
    for row in rows:
        mod = types.ModuleType(row["task_id"].replace("-", "_"))
        exec(compile(row["source"], row["task_id"], "exec"), mod.__dict__)
        for name in ("solution", "make_inputs", "SIZES", "oracle"):
            assert hasattr(mod, name), (row["task_id"], name)
        assert {"smoke", "full"} <= set(mod.SIZES)
        assert row["tolerance"]["rtol"] is not None
        assert row["validation"] and all(v["status"] == "passed" for v in row["validation"])
        assert row["dims"] and row["collectives"]
