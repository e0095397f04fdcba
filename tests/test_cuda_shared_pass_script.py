"""benchmarks/cuda_shared_pass.sh, the time-boxed call of the shared-GPU pass, as a CPU dry run (gloo,
smoke): its phases append records to OUT_DIR, the H200-only phase skips without a large GPU, and a phase
that would start after the budget is not started."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "cuda_shared_pass.sh"


def _call(out: Path, tasks: Path, budget: int, phases: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "BACKEND": "gloo", "SIZE": "smoke", "TASKS": str(tasks), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        ["bash", str(SCRIPT), str(out), str(budget), phases],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_call_records_its_phases_and_skips_the_large_gpu_phase(core_tasks, tmp_path):
    res = _call(tmp_path / "call", core_tasks, 300, "ws2,big")
    assert res.returncode == 0, res.stderr
    records = [json.loads(line) for line in (tmp_path / "call" / "ws2.jsonl").read_text().splitlines()]
    offered = [json.loads(line) for line in (core_tasks / "manifest.jsonl").read_text().splitlines()]
    assert {r["task_id"] for r in records} == {t["task_id"] for t in offered if 2 in t.get("world_sizes", [2])}
    assert all(r["backend"] == "gloo" and r["size"] == "smoke" and r["world_size"] == 2 for r in records)
    assert "skipped: the oracle needs a GPU of more than 100 GiB" in res.stdout
    assert not (tmp_path / "call" / "big.jsonl").exists()


def test_no_phase_starts_without_budget_left(core_tasks, tmp_path):
    res = _call(tmp_path / "call", core_tasks, 10, "ws2,ws4")
    assert res.returncode == 0, res.stderr
    assert "== ws2: not started" in res.stdout and "== ws4: not started" in res.stdout
    assert not list((tmp_path / "call").glob("*.jsonl"))
