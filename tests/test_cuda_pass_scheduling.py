"""benchmarks/cuda_correctness_pass.py's scheduling, on CPU: the memory gate admits items while their
estimates fit and runs an oversized one alone, estimates scale with the world size, failures before a
verdict are retried, and a second run resumes with nothing left to do."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("cuda_pass", REPO / "benchmarks" / "cuda_correctness_pass.py")
cuda_pass = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cuda_pass)


def test_the_gate_admits_what_fits_and_holds_back_what_does_not():
    gate = cuda_pass.MemoryGate(100)
    a = gate.acquire(60)
    started = threading.Event()

    def second():
        took = gate.acquire(50)  # 60 + 50 > 100: waits for the first to finish
        started.set()
        gate.release(took)

    th = threading.Thread(target=second)
    th.start()
    time.sleep(0.2)
    assert not started.is_set()
    gate.release(a)
    th.join(5)
    assert started.is_set() and gate.used == 0 and gate.running == 0


def test_an_oversized_or_unknown_item_runs_alone():
    gate = cuda_pass.MemoryGate(100)
    assert gate.acquire(None) == 100 and gate.acquire_would_block(1)
    gate.release(100)
    took = gate.acquire(500)  # larger than the GPU: alone, not forever blocked
    assert took == 100 and gate.running == 1
    gate.release(took)


def _eventually(condition, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _pool(gate, closed: list[str], name: str):
    """An open rank pool as the gate sees it, and the callback that closes it."""
    gate.pool_opened()

    def close() -> None:
        closed.append(name)
        gate.pool_closed()

    return close


def test_an_item_that_runs_alone_waits_for_every_other_pool_to_close():
    """An idle pool's ranks hold GPU memory: an item alone on the GPU must not start beside them (pass 12)."""
    gate, closed, started = cuda_pass.MemoryGate(100), [], threading.Event()
    close_other = _pool(gate, closed, "other")

    def alone():
        took = gate.acquire(None)
        started.set()
        gate.release(took)

    th = threading.Thread(target=alone)
    th.start()
    time.sleep(0.2)
    assert not started.is_set()  # nothing runs, but the other pool is open
    # the other pool's next item would go ahead of the waiting one: instead its pool is closed and it waits
    second = threading.Thread(target=lambda: gate.release(gate.acquire(10, close_other)))
    second.start()
    th.join(5)
    second.join(5)
    assert started.is_set() and closed == ["other"] and gate.pools_open == 0 and gate.running == 0


def test_a_pool_waiting_for_room_is_closed_when_an_item_to_run_alone_arrives():
    gate, closed, admitted = cuda_pass.MemoryGate(100), [], []
    big = gate.acquire(90)
    close_waiting = _pool(gate, closed, "waiting")
    waiting = threading.Thread(target=lambda: admitted.append(gate.acquire(20, close_waiting)))
    waiting.start()
    time.sleep(0.2)
    assert closed == []  # waiting for room only: its pool stays open
    alone = threading.Thread(target=lambda: admitted.append(gate.acquire(None)))
    alone.start()
    assert _eventually(lambda: closed == ["waiting"])
    gate.release(big)
    alone.join(5)
    assert admitted == [100]  # the item alone goes first
    gate.release(100)
    waiting.join(5)
    assert admitted == [100, 20]


def test_two_callers_that_each_hold_a_pool_and_want_to_run_alone_both_run():
    gate, closed, done = cuda_pass.MemoryGate(100), [], []
    closers = [_pool(gate, closed, name) for name in "ab"]

    def run_alone(close):
        took = gate.acquire(None, close)
        assert gate.running == 1 and gate.pools_open == 0
        done.append(took)
        gate.release(took)

    threads = [threading.Thread(target=run_alone, args=(c,)) for c in closers]
    for th in threads:
        th.start()
    for th in threads:
        th.join(5)
    assert done == [100, 100] and sorted(closed) == ["a", "b"]


def test_estimates_sum_the_ranks_measured_and_scale_from_a_smaller_world_size(tmp_path):
    gib, ctx = 2**30, cuda_pass.CONTEXT_BYTES
    records = [  # rank 0 holds the oracle; at world size 8 the largest total counts
        {"task_id": "t", "world_size": 2, "peak_memory_bytes": [4 * gib, 1 * gib]},
        {"task_id": "t", "world_size": 8, "peak_memory_bytes": [20 * gib] + 7 * [3 * gib]},
        {"task_id": "t", "world_size": 8, "peak_memory_bytes": [10 * gib] + 7 * [3 * gib]},
        {"task_id": "u", "world_size": 4, "peak_memory_bytes": None},
    ]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    peaks = cuda_pass.known_peaks([path])
    assert set(peaks) == {"t"} and peaks["t"][8][0] == 20 * gib
    # measured at this size: the sum of the ranks (41 GiB), not the largest rank eight times (160 GiB)
    assert cuda_pass.estimate_bytes("t", 8, peaks) == int(1.1 * (41 * gib + 8 * ctx))
    # measured only at 2: rank 0's peak once, the other rank's for the rest, both doubled at 4
    assert cuda_pass.estimate_bytes("t", 4, peaks) == int((4 + 3 * 1) * gib * 2 + 4 * ctx)
    assert cuda_pass.estimate_bytes("u", 2, peaks) is None and cuda_pass.estimate_bytes("v", 2, peaks) is None


@pytest.mark.parametrize(
    ("status", "reason", "retried"),
    [
        ("failed", "error: rank 0: OutOfMemoryError: CUDA out of memory", True),
        ("failed", "timeout: rank 1 did not answer in 75 s", True),
        ("failed", "crashed: rank 0 exited with -9", True),
        ("failed", "oracle: max error 0.3 > tolerance 0.01", False),
        ("passed", "", False),
    ],
)
def test_only_failures_before_a_verdict_are_tried_again(status, reason, retried):
    assert cuda_pass.infrastructure_failure(SimpleNamespace(status=status, reason=reason)) is retried


def test_recorded_resource_failures_run_alone_after_the_rest():
    """A failure recorded before any verdict (out of memory beside other pools) is retried alone, after the
    items never tried; one a check failed is queued by its estimate like any other."""
    items = [
        (4, {"task_id": "oom", "_alone": True}),
        (4, {"task_id": "big", "_alone": False}),
        (4, {"task_id": "small", "_alone": False}),
        (2, {"task_id": "two", "_alone": False}),
    ]
    sizes = {"big": 30, "small": 10, "two": 5, "oom": 1}
    todo = cuda_pass.schedule(items, lambda t, ws: sizes[t["task_id"]])
    assert [(need, t["task_id"]) for need, t in todo[4]] == [(10, "small"), (30, "big"), (None, "oom")]
    assert [t["task_id"] for _, t in todo[2]] == ["two"]


def test_a_dry_run_records_every_item_and_a_second_run_resumes_with_none(core_tasks, tmp_path):
    results = tmp_path / "r.jsonl"
    cmd = [
        sys.executable,
        str(REPO / "benchmarks" / "cuda_correctness_pass.py"),
        "--out",
        str(core_tasks),
        "--results",
        str(results),
        "--backend",
        "gloo",
        "--size",
        "smoke",
        "--world-size",
        "2",
        "--jobs",
        "2",
    ]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    n = len(results.read_text().splitlines())
    assert n > 0 and f"{n} (task, world size) items" in first.stdout
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert "0 (task, world size) items" in second.stdout


def test_earlier_passes_count_as_done_for_their_content_hash_only(core_tasks, tmp_path):
    """--done globs the committed folders of earlier passes: a task passed there is not checked again, a
    failure there only with --retry-failed, and a record of an older module (another hash) counts for nothing."""
    import json

    from mgbench.store import load_manifest

    tasks = [t for t in load_manifest(core_tasks) if 2 in t.get("world_sizes", [2])][:4]
    rec = {"world_size": 2, "size": "smoke", "backend": "gloo"}
    folder = tmp_path / "results" / "pass-1"
    folder.mkdir(parents=True)
    rows = [
        {**rec, "task_id": tasks[0]["task_id"], "content_hash": tasks[0]["content_hash"], "status": "passed"},
        {
            **rec,
            "task_id": tasks[1]["task_id"],
            "content_hash": tasks[1]["content_hash"],
            "status": "failed",
            "reason": "error: rank 0: OutOfMemoryError: CUDA out of memory",
        },
        {**rec, "task_id": tasks[2]["task_id"], "content_hash": "an-older-module", "status": "passed"},
        {  # out of memory with the GPU to itself: it does not fit, and is never tried again
            **rec,
            "task_id": tasks[3]["task_id"],
            "content_hash": tasks[3]["content_hash"],
            "status": "failed",
            "reason": "error: rank 0: OutOfMemoryError: CUDA out of memory",
            "ran_alone": True,
            "hardware": "NVIDIA H100 80GB HBM3",
        },
    ]
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # the held-out triggers beside them are no records: read past, not a KeyError
    (folder / "heldout-fired.jsonl").write_text(json.dumps({"sample": "c.py", "fired": True}) + "\n")
    args = cuda_pass.parse_args(
        ["--out", str(core_tasks), "--results", str(tmp_path / "r.jsonl"), "--world-size", "2", "--size", "smoke"]
        + ["--backend", "gloo", "--done", str(tmp_path / "results" / "*" / "*.jsonl")]
    )
    planned = {t["task_id"] for _, t in cuda_pass.plan(args)}
    assert tasks[0]["task_id"] not in planned and tasks[1]["task_id"] not in planned
    assert tasks[2]["task_id"] in planned
    args.retry_failed = True
    planned = {t["task_id"]: t for _, t in cuda_pass.plan(args)}
    assert tasks[1]["task_id"] in planned and tasks[0]["task_id"] not in planned
    assert tasks[3]["task_id"] not in planned
    assert tasks[3]["task_id"] in {t["task_id"] for _, t in cuda_pass.plan(args, "NVIDIA H200")}  # a larger card
    assert planned[tasks[1]["task_id"]]["_alone"] is True  # out of memory before a verdict: tried alone
    args.skip = [tasks[1]["task_id"]]
    assert tasks[1]["task_id"] not in {t["task_id"] for _, t in cuda_pass.plan(args)}
    args.skip, args.only = None, [tasks[2]["task_id"][:-2] + "*"]
    assert {t["task_id"] for _, t in cuda_pass.plan(args)} <= {
        t["task_id"] for t in load_manifest(core_tasks) if t["task_id"].startswith(tasks[2]["task_id"][:-2])
    }

    # where the pass stands: the current-hash pass counts, the failure is listed, the older module's pass not
    args.only = [t["task_id"] for t in tasks]
    text = cuda_pass.standing(args)
    assert text.splitlines()[0].split() == [
        "world",
        "passed",
        "failed",
        "retry",
        "alone",
        "does",
        "not",
        "fit",
        "unchecked",
        "not",
        "offered",
    ]
    # the out-of-memory failure beside other pools gave no verdict: it is to be retried alone, not failed
    assert text.splitlines()[2].split() == ["2", "1", "0", "1", "1", "1", "0"]
    assert f"ws=2 {tasks[1]['task_id']}: retry alone: error" in text and "1 of 4 tasks offered at [2] passed" in text
    assert f"ws=2 {tasks[3]['task_id']}: does not fit on NVIDIA H100 80GB HBM3: error" in text


def test_filing_a_run_keeps_failures_out_of_what_publish_reads(tmp_path):
    """--file-into puts passes where `mgbench publish` reads correctness records and failures beside them: a
    failure before any verdict (out of memory beside other pools) must not stop a task being published."""
    import json

    from mgbench.dataset.baselines import load_gpu_results

    rec = {"content_hash": "h", "world_size": 4, "size": "full", "backend": "shared-gpu", "hardware": "H100"}
    rows = [
        {**rec, "task_id": "a", "status": "passed", "reason": ""},
        {**rec, "task_id": "b", "status": "failed", "reason": "error: rank 0: OutOfMemoryError"},
    ]
    run = tmp_path / "run.jsonl"
    run.write_text("".join(json.dumps(r) + "\n" for r in rows))
    folder = tmp_path / "results" / "cuda-shared-pass-x"
    assert "1 passed, 1 failed" in cuda_pass.file_into(run, folder)
    read = load_gpu_results([tmp_path / "results"], current=set()).validation_files
    assert [p.name for p in read] == ["validation-shared-gpu.jsonl"]
    assert [json.loads(line)["task_id"] for line in read[0].read_text().splitlines()] == ["a"]
    assert json.loads((folder / "failures.jsonl").read_text())["task_id"] == "b"
    assert json.loads((folder / "correctness.json").read_text())["correctness_only"] is True


def test_a_pool_that_will_not_start_leaves_a_record_per_item_not_a_dead_worker(core_tasks, tmp_path, monkeypatch):
    import mgbench.validation.pool as pool_module

    class NoPool:
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            raise RuntimeError("no pool today")

    monkeypatch.setattr(pool_module, "RankPool", NoPool)
    results = tmp_path / "r.jsonl"
    args = cuda_pass.parse_args(
        ["--out", str(core_tasks), "--results", str(results), "--world-size", "2", "--size", "smoke"]
        + ["--backend", "gloo", "--budget-s", "60", "--timeout", "30"]
    )
    planned = cuda_pass.plan(args)
    cuda_pass.run(args)
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    # every item recorded, and again when retried (a failure before a verdict): the worker went on after the first
    assert sorted(r["task_id"] for r in rows) == sorted(2 * [t["task_id"] for _, t in planned]) and len(planned) > 1
    assert all(r["status"] == "failed" and r["reason"] == "error: RuntimeError: no pool today" for r in rows)
