"""benchmarks/cuda_shared_pass.sh, the time-boxed call of the shared-GPU pass, as a CPU dry run (gloo,
smoke): its phases append records to OUT_DIR, a failed phase fails the call, and a phase that would start
after the budget is not started."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "cuda_shared_pass.sh"


def _call(out: Path, tasks: Path, budget: int, phases: str, **extra_env: str) -> subprocess.CompletedProcess:
    """The script on CPU, with an `nvidia-smi` that finds no GPU (whatever this machine has)."""
    fake = out.parent / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "nvidia-smi").write_text("#!/bin/sh\nexit 9\n")
    (fake / "nvidia-smi").chmod(0o755)
    env = {
        **os.environ,
        "BACKEND": "gloo",
        "SIZE": "smoke",
        "TASKS": str(tasks),
        "PYTHONPATH": str(REPO),
        "PATH": f"{fake}:{os.environ['PATH']}",
        **extra_env,
    }
    return subprocess.run(
        ["bash", str(SCRIPT), str(out), str(budget), phases],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_call_records_its_phases(core_tasks, tmp_path):
    res = _call(tmp_path / "call", core_tasks, 300, "ws2,big")
    assert res.returncode == 0, res.stderr
    records = [json.loads(line) for line in (tmp_path / "call" / "ws2.jsonl").read_text().splitlines()]
    offered = [json.loads(line) for line in (core_tasks / "manifest.jsonl").read_text().splitlines()]
    assert {r["task_id"] for r in records} == {t["task_id"] for t in offered if 2 in t.get("world_sizes", [2])}
    assert all(r["backend"] == "gloo" and r["size"] == "smoke" and r["world_size"] == 2 for r in records)
    assert "== big (" in res.stdout and "== big (" in (tmp_path / "call" / "call.log").read_text()  # none to check
    assert sorted(f.name for f in (tmp_path / "call").iterdir()) == [
        "call.log",
        "ws2.jsonl",
    ]  # one log, not one a phase


def test_no_phase_starts_without_budget_left_for_its_items(core_tasks, tmp_path):
    # ws2 keeps 130 s back for its items in flight: with 150 s left it would have 20 s, so it does not start
    res = _call(tmp_path / "call", core_tasks, 150, "ws2,ws4")
    assert res.returncode == 0, res.stderr
    assert "== ws2: not started" in res.stdout and "== ws4 (" in res.stdout
    assert not (tmp_path / "call" / "ws2.jsonl").exists() and (tmp_path / "call" / "ws4.jsonl").exists()


def test_a_failed_phase_fails_the_call(core_tasks, tmp_path):
    res = _call(tmp_path / "call", core_tasks, 300, "big,l4", L4=str(tmp_path / "no-such-folder"))
    assert "== l4 (" in (tmp_path / "call" / "call.log").read_text()
    assert res.returncode == 1 and "failed: l4" in res.stdout and "big" not in res.stdout.split("failed:")[1]


def test_a_failed_gpu_test_sends_the_rest_of_the_call_through_host_memory(core_tasks, tmp_path):
    """gputests runs first; when it fails, the phases after it hand oracle parts through host memory (the
    CUDA IPC route is the untried one), the log says so and the call fails."""
    failing = tmp_path / "test_handle.py"
    failing.write_text("import os\n\ndef test_ipc():\n    assert False, 'cannot map the handle'\n")
    probe = tmp_path / "test_env.py"
    probe.write_text("import os\n\ndef test_env():\n    assert os.environ.get('MGBENCH_ORACLE_HANDOFF') == 'host'\n")
    res = _call(tmp_path / "call", core_tasks, 300, "gputests,big", GPUTESTS=str(failing))
    log = (tmp_path / "call" / "call.log").read_text()
    assert "cannot map the handle" in log and "oracle parts go through host memory" in res.stdout
    assert res.returncode == 1 and "failed: gputests" in res.stdout and "== big (" in log
    res = _call(tmp_path / "again", core_tasks, 300, "gputests,gputests", GPUTESTS=f"{failing} {probe}")
    assert "1 failed, 1 passed" in (tmp_path / "again" / "call.log").read_text()


def test_the_suites_run_in_shards_side_by_side_and_each_test_once(core_tasks, tmp_path):
    suite = tmp_path / "test_suite.py"
    suite.write_text("".join(f"def test_{k}():\n    assert {k} != 3, 'judged wrong'\n\n" for k in range(5)))
    res = _call(tmp_path / "call", core_tasks, 300, "suites", SUITES=str(suite), SUITE_SHARDS="2")
    out = tmp_path / "call"
    ran = [json.loads(line) for line in (out / "suites.jsonl").read_text().splitlines()]
    assert sorted(r["nodeid"].split("::")[1] for r in ran) == [f"test_{k}" for k in range(5)]
    assert [r["reason"] for r in ran if r["outcome"] == "failed"][0].count("judged wrong")
    log = (out / "call.log").read_text()
    assert "-- shard 0/2 (exit 0)" in log and "-- shard 1/2 (exit 1)" in log  # test_3 is in shard 1
    assert res.returncode == 1 and "failed: suites" in res.stdout
    assert sorted(f.name for f in out.iterdir()) == ["call.log", "suites.jsonl"]  # the shards' logs are in call.log


def test_a_held_out_seed_that_cannot_be_read_fails_the_phase_and_judges_nothing(core_tasks, tmp_path):
    res = _call(tmp_path / "call", core_tasks, 300, "heldout", HELDOUT_SEED=str(tmp_path / "no-such.jsonl"))
    assert res.returncode == 1 and "failed: heldout" in res.stdout
    assert "cannot be read; the held-out candidates were not judged" in (tmp_path / "call" / "call.log").read_text()
    assert not (tmp_path / "call" / "heldout.jsonl").exists()


def test_a_shard_left_without_tests_does_not_fail_the_suites(core_tasks, tmp_path):
    suite = tmp_path / "test_suite.py"
    suite.write_text("def test_a():\n    pass\n")
    res = _call(tmp_path / "call", core_tasks, 300, "suites", SUITES=str(suite), SUITE_SHARDS="3")
    assert res.returncode == 0, res.stdout
    assert "-- shard 2/3 (exit 5)" in (tmp_path / "call" / "call.log").read_text()


def test_phases_that_would_return_more_files_than_a_call_brings_back_are_refused(core_tasks, tmp_path):
    # five records files, heldout's two, suites' one and the log: nine, one more than a lent machine returns
    res = _call(tmp_path / "call", core_tasks, 300, "ws2,big,heldout,l4,ws4,ws8,suites")
    assert res.returncode == 2
    assert "leave 9 files, more than the 8" in res.stderr
    assert not (tmp_path / "call").exists()  # refused before anything ran
