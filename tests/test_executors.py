"""mgbench.validation.executors on CPU/gloo: one small suite (two generated level-1 tasks, a slow one, one that
raises, one that hangs) validated through the local executor, submitit's LocalExecutor (the real
submitit code path: job array, checkpoint + requeue on a preemption signal, a cancelled job
resubmitted) and a Ray instance started here (wide shards on placement groups); identical verdicts,
one result line per task. Plus the device/port partitioning of the local executor and the merging."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import GOOD_SOLUTION, PLANTED_HEADER

from mgbench.store import append_jsonl, read_jsonl
from mgbench.validation.executors.dispatch import dispatch, plan_validate
from mgbench.validation.executors.local import LocalExecutor
from mgbench.validation.executors.shard import Shard, merge_parts, parts_dir

HANG = (
    "\ndef solution(x):\n    y = x.clone()\n    if dist.get_rank() == 0:\n        dist.recv(y, src=1)\n    return y\n"
)
PLANTED = {
    "zz-slow": PLANTED_HEADER
    + "\nimport time\n"
    + GOOD_SOLUTION.replace("y = x.clone()", "time.sleep(0.4)\n    y = x.clone()"),
    "zz-hangs": PLANTED_HEADER + HANG,
    "zz-raises": PLANTED_HEADER + "\ndef solution(x):\n    raise ValueError('planted failure')\n",
}
# seconds a planted hang holds its shard: long enough that a shard killed inside it on a loaded
# 2-core machine is still inside it when the kill lands
TIMEOUT = "10"


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    """Manifest order g1, g2, slow, hangs, raises: 2 round-robin shards [g1, slow, raises], [g2, hangs]."""
    from mgbench.generator import generate

    out = tmp_path_factory.mktemp("suite")
    generate(out, families=["broadcast"], dtypes=["fp32"])
    lines = (out / "manifest.jsonl").read_text().splitlines()
    assert len(lines) == 2
    for tid, src in PLANTED.items():
        (out / "tasks" / f"{tid}.py").write_text(src)
        lines.append(
            json.dumps(
                {
                    "task_id": tid,
                    "module": f"tasks/{tid}.py",
                    "level": 1,
                    "family": tid,
                    "dtype": "float32",
                    "world_sizes": [2],
                    "content_hash": hashlib.sha256(src.encode()).hexdigest(),
                }
            )
        )
    (out / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    return out


def verdicts(results: Path) -> dict[str, tuple]:
    return {
        r["task_id"]: (r["status"], r["reason"], json.dumps(r["checks"], sort_keys=True)) for r in read_jsonl(results)
    }


def lines_per_task(results: Path) -> Counter:
    return Counter(r["task_id"] for r in read_jsonl(results))


def validate_cli(suite: Path, results: Path, *extra: str) -> int:
    from mgbench.cli import main

    return main(
        ["validate", "--out", str(suite), "--results", str(results), "--timeout", TIMEOUT, "--shards", "2", *extra]
    )


@pytest.fixture(scope="module")
def local_verdicts(suite, tmp_path_factory) -> dict[str, tuple]:
    """The reference: `mgbench validate --executor local`, two shards at once (subprocesses)."""
    results = tmp_path_factory.mktemp("local") / "validation.jsonl"
    assert validate_cli(suite, results, "--executor", "local", "--local-ranks", "4") == 1  # planted failures
    assert lines_per_task(results) == Counter({t: 1 for t in verdicts(results)})
    v = verdicts(results)
    assert len(v) == 5
    assert v["zz-raises"][0] == "failed" and "planted failure" in v["zz-raises"][1]
    assert v["zz-hangs"][0] == "failed" and v["zz-hangs"][1].startswith("timeout")
    assert all(v[t][0] == "passed" for t in v if t not in ("zz-raises", "zz-hangs"))
    assert validate_cli(suite, results, "--executor", "local", "--local-ranks", "4") == 1  # resumed: nothing run
    assert lines_per_task(results) == Counter({t: 1 for t in v})
    return v


def _act_at_first_line(actions: dict, timeout_s: float = 240) -> None:
    """Call each action as soon as its results part has a line (polled together, every 20 ms)."""
    deadline = time.monotonic() + timeout_s
    while actions:
        for part in [p for p in actions if next(iter(read_jsonl(p, warn=False)), None) is not None]:
            actions.pop(part)()
        assert time.monotonic() < deadline, f"never got a line: {', '.join(map(str, actions))}"
        time.sleep(0.02)


def _task_pid(controller_pid: int) -> int:
    """The job's task process under submitit's local controller (SLURM signals the task the same way)."""
    kids = Path(f"/proc/{controller_pid}/task/{controller_pid}/children").read_text().split()
    assert len(kids) == 1, kids
    return int(kids[0])


@pytest.fixture
def sigint_ignored():
    """Run as from a background job without job control (`cmd &` in a script, nohup), where SIGINT is
    SIG_IGN and children inherit it: submitit's local cancel() is a SIGINT, which then did nothing."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc to find the job's task")
def test_submitit_array_preempted_and_killed_then_resubmitted(suite, tmp_path, local_verdicts, sigint_ignored):
    pytest.importorskip("submitit")
    from mgbench.validation.executors.slurm import SlurmExecutor, SlurmOptions

    results = tmp_path / "validation.jsonl"
    ex = SlurmExecutor(
        SlurmOptions(cluster="local", gpus_per_node=2, folder=str(tmp_path / "submitit"), time_min=10), quiet=True
    )
    plan = plan_validate(suite, results, [2], "gloo", "smoke", 2, ex.concurrency, options={"timeout_s": float(TIMEOUT)})
    assert [s.items for s in plan] == [
        ["l1-broadcast-root0-bw-fp32", "zz-slow", "zz-raises"],
        ["l1-broadcast-root0-lat-fp32", "zz-hangs"],
    ]
    (job_a, (a,)), (job_b, (b,)) = ex.submit(plan)
    # a's first line: it is inside zz-slow, preempt it (SIGUSR2, as SLURM does); b's first line: it is
    # inside zz-hangs, kill the job. Each is acted on as soon as it gets there: waiting for one first
    # let the other finish its item meanwhile on a loaded machine (the hang holds b for TIMEOUT s).
    _act_at_first_line({a.part: lambda: os.kill(_task_pid(job_a._process.pid), signal.SIGUSR2), b.part: job_b.cancel})
    first = {o.name: o for o in ex.wait([(job_a, [a]), (job_b, [b])])}
    assert first[a.name].status == "ok" and first[a.name].missing == 0  # requeued and finished
    assert "Calling checkpoint method" in (job_a.stderr() or "") + (job_a.stdout() or "")
    assert first[b.name].status == "failed" and first[b.name].missing == 1
    rep = dispatch(ex, plan, results)  # resubmit the whole plan: only zz-hangs is left
    assert rep.skipped == 1 and [o.items for o in rep.outcomes] == [1] and not rep.failed()
    assert lines_per_task(results) == Counter({t: 1 for t in local_verdicts})  # nothing ran twice
    assert verdicts(results) == local_verdicts


def ray_cli(*args: str, timeout: float = 900):
    """The CLI with `--executor ray` in a child process: a Ray driver that aborts (a C++ check in Ray's
    core worker) takes down that child, never the test session."""
    pytest.importorskip("ray", reason="ray is not installed (pip install 'mgbench[scale]')")
    from dataset_helpers import child_env, mgbench

    r = mgbench(*args, "--executor", "ray", env=child_env(RAY_ADDRESS=""), timeout=timeout)
    assert r.returncode >= 0, f"the Ray driver died with signal {-r.returncode}: {r.stderr[-2000:]}"
    return r


def test_ray_wide_shards_give_the_same_verdicts(suite, tmp_path, local_verdicts):
    """One rank per Ray "node" (bundle): each shard spans a placement group of two bundles."""
    results = tmp_path / "validation.jsonl"
    r = ray_cli(
        "validate",
        "--out",
        str(suite),
        "--results",
        str(results),
        "--timeout",
        TIMEOUT,
        "--shards",
        "1",
        "--ray-gpus-per-node",
        "1",
    )
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]  # the planted failures, no shard lost
    assert ", 0 failed;" in r.stdout, r.stdout[-2000:]  # every shard came back
    assert verdicts(results) == local_verdicts
    assert lines_per_task(results) == Counter({t: 1 for t in local_verdicts})


HEAD = "import torch\nimport torch.distributed as dist\n"
SAMPLES = {
    "l1-broadcast-root0-lat-fp32@1.py": HEAD
    + textwrap.dedent("""
               def solution(x):
                   y = x.clone()
                   dist.broadcast(y, src=0)
                   return y
           """),
    "l1-broadcast-root0-lat-fp32@2.py": HEAD + "def solution(x):\n    return torch.zeros_like(x)\n",
    "l1-broadcast-root0-bw-fp32@1.py": HEAD + HANG,
}


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_eval_batch_through_executors(suite, tmp_path, executor):
    sols = tmp_path / "sols"
    sols.mkdir()
    for name, src in SAMPLES.items():
        (sols / name).write_text(src)
    args = [
        "eval",
        "--tasks",
        str(suite),
        "--solutions-dir",
        str(sols),
        "--trials",
        "1",
        "--no-timing",
        "--backend",
        "gloo",
        "--world-size",
        "2",
        "--timeout",
        TIMEOUT,
        "--seed",
        "1",
        "--shards",
        "2",
        "--local-ranks",
        "2",
        "--json",
    ]
    if executor == "ray":

        def run() -> int:
            return ray_cli(*args).returncode
    else:
        from mgbench.cli import main

        def run() -> int:
            return main([*args, "--executor", "local"])

    assert run() == 2  # the hanging sample: timeout -> exit code 2
    recs = {r["sample"]: r for r in read_jsonl(sols / "eval-results.jsonl")}
    assert {k: r["status"] for k, r in recs.items()} == {
        "l1-broadcast-root0-lat-fp32@1.py": "correct",
        "l1-broadcast-root0-lat-fp32@2.py": "incorrect",
        "l1-broadcast-root0-bw-fp32@1.py": "timeout",
    }
    assert all(r["sample_path"] == str(sols / k) for k, r in recs.items())
    assert run() == 2  # resumed: nothing run, the same verdicts, the same code
    assert len(list(read_jsonl(sols / "eval-results.jsonl"))) == 3


FAKE_RUNNER = textwrap.dedent("""
    import json, os, sys, time
    shard = json.loads(sys.stdin.read())
    t0 = time.time()
    time.sleep(0.6)
    rec = {"name": shard["name"], "gpus": os.environ["CUDA_VISIBLE_DEVICES"], "ports": os.environ["MGBENCH_PORTS"],
           "t0": t0, "t1": time.time()}
    with open(os.environ["FAKE_LOG"], "a") as f:
        f.write(json.dumps(rec) + "\\n")
""")


def test_local_shards_never_share_a_gpu_or_a_port(tmp_path, monkeypatch):
    import mgbench.validation.executors.local as local

    monkeypatch.setattr(local, "node_devices", lambda backend: ["0", "1", "2", "3"])
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "log.jsonl"))
    shards = [
        Shard(
            "validate",
            f"s{i}",
            [f"t{i}"],
            [[f"t{i}", "h", ws, "full", "nccl"]],
            ws,
            "nccl",
            "full",
            str(tmp_path / "r.jsonl"),
            str(tmp_path),
        )
        for i, ws in enumerate([2, 2, 1, 1, 2, 4, 1])
    ]
    ex = LocalExecutor(quiet=True, poll_s=0.05, command=[sys.executable, "-c", FAKE_RUNNER])
    assert ex.concurrency(2, "nccl") == 2
    out = ex.run(shards)
    assert {o.name for o in out} == {s.name for s in shards}
    assert all(o.status == "failed" and o.missing == 1 for o in out)  # the fake wrote no results
    runs = list(read_jsonl(tmp_path / "log.jsonl"))
    assert len(runs) == len(shards)
    ws = {s.name: s.world_size for s in shards}
    assert all(len(r["gpus"].split(",")) == ws[r["name"]] for r in runs)
    overlapping = 0
    for i, a in enumerate(runs):
        for b in runs[i + 1 :]:
            if a["t0"] < b["t1"] and b["t0"] < a["t1"]:
                overlapping += 1
                assert not set(a["gpus"].split(",")) & set(b["gpus"].split(",")), (a, b)
                lo_a, hi_a = map(int, a["ports"].split("-"))
                lo_b, hi_b = map(int, b["ports"].split("-"))
                assert hi_a < lo_b or hi_b < lo_a, (a, b)
    assert overlapping >= 2


def test_free_port_draws_from_the_shard_range(monkeypatch):
    from mgbench.validation.pool import free_port

    monkeypatch.setenv("MGBENCH_PORTS", "31000-31009")
    assert all(31000 <= free_port() <= 31009 for _ in range(20))


def test_merge_keeps_one_settled_result_per_key(tmp_path):
    store = tmp_path / "v.jsonl"

    def rec(tid, status, t):
        return {
            "task_id": tid,
            "content_hash": "h",
            "world_size": 2,
            "size": "smoke",
            "backend": "gloo",
            "status": status,
            "finished_at": t,
        }

    parts = parts_dir(store)
    append_jsonl(store, rec("a", "passed", 1))
    append_jsonl(parts / "validate-s0.jsonl", rec("a", "passed", 5))  # the same task, run again: dropped
    append_jsonl(parts / "validate-s0.jsonl", rec("b", "failed", 2))
    append_jsonl(parts / "validate-s1.jsonl", rec("b", "passed", 3))  # a retry of a failure: kept
    append_jsonl(parts / "validate-s1.jsonl", rec("c", "failed", 4))
    assert merge_parts(store, "validate") == 3
    assert merge_parts(store, "validate") == 0
    got = [(r["task_id"], r["status"]) for r in read_jsonl(store)]
    assert got == [("a", "passed"), ("b", "failed"), ("b", "passed"), ("c", "failed")]


def test_plan_is_stable_and_trimmed_shards_keep_their_part_file(suite, tmp_path):
    a = plan_validate(suite, tmp_path / "v.jsonl", [2], "gloo", "smoke", 2, lambda ws, b: 1)
    b = plan_validate(suite, tmp_path / "v.jsonl", [2], "gloo", "smoke", 2, lambda ws, b: 1)
    assert [s.name for s in a] == [s.name for s in b] and len(a) == 2
    t = a[0].only(["zz-raises"])
    assert t.items == ["zz-raises"] and t.keys[0][0] == "zz-raises" and t.part == a[0].part
    assert Shard.from_json(t.to_json()) == t


def test_no_wait_rerun_skips_shards_still_in_the_queue(tmp_path, monkeypatch):
    """`--slurm-no-wait`, then the same command again: shards whose job squeue still lists are left alone."""
    from mgbench.validation.executors.slurm import JOBS_FILE, queued_shards

    shards = [
        Shard(
            "validate",
            f"validate-s{i}",
            ["t"],
            [["t", "h", 2, "smoke", "gloo"]],
            2,
            "gloo",
            "smoke",
            str(tmp_path / "r.jsonl"),
            str(tmp_path),
        )
        for i in range(3)
    ]
    for i, jid in enumerate(["41_0", "41_1", "42_0"]):
        append_jsonl(parts_dir(tmp_path / "r.jsonl") / JOBS_FILE, {"shard": f"validate-s{i}", "job_id": jid})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text("#!/bin/sh\necho 41_1\necho 42_0\necho 99_3\n")
    (bin_dir / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert queued_shards(shards) == {"validate-s1": "41_1", "validate-s2": "42_0"}
    assert merge_parts(tmp_path / "r.jsonl", "validate") == 0  # the job ledger is not a part file
