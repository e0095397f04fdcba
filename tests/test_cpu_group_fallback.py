"""Level-4 tasks whose collectives get CPU tensors fail on an NCCL-only group; validation and the gloo/NCCL
cross-check run them again on a pool whose ranks give CPU tensors a gloo backend (MGBENCH_CPU_GLOO).
The pools are fakes here (no GPU): they record their env and answer as NCCL would."""

from __future__ import annotations

import json

from mgbench.scrapers.harness.run import crosscheck as xc
from mgbench.validation import run as vrun
from mgbench.validation.pool import CPU_GLOO_ENV, NO_CPU_BACKEND, needs_cpu_group

CPU_TASK, OTHER = "l4_fairscale_broadcast_object", "l4_other"


class FakePool:
    made: list[dict] = []
    restarts = 0

    def __init__(self, world_size, backend, pg_timeout_s=300.0, env=None, extra_handlers=None):
        self.world_size, self.backend, self.env = world_size, backend, dict(env or {})
        FakePool.made.append(self.env)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def _fails_without_gloo(pool, task_id):
    return task_id == CPU_TASK and pool.env.get("MGBENCH_CPU_GLOO") != "1"


def _manifest(tmp_path, level=4):
    (tmp_path / "tasks").mkdir()
    rows = [
        {"task_id": t, "content_hash": t[-4:], "level": level, "world_sizes": [2], "module": f"tasks/{t}.py"}
        for t in (CPU_TASK, OTHER)
    ]
    for r in rows:
        (tmp_path / r["module"]).write_text("")
    (tmp_path / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path / "manifest.jsonl"


def test_needs_cpu_group_only_on_nccl():
    msg = f"error: rank 0: RuntimeError: {NO_CPU_BACKEND} (distributed_c10d.py:2968)"
    assert needs_cpu_group("nccl", msg) and not needs_cpu_group("gloo", msg)
    assert not needs_cpu_group("nccl", "timeout: timed out after 30s")


def _fake_check(pool, t, size, hardware, seed, timeout_s):
    bad = _fails_without_gloo(pool, t["task_id"])
    return vrun.ValidationResult(
        t["task_id"],
        t["content_hash"],
        pool.world_size,
        size,
        pool.backend,
        hardware,
        "failed" if bad else "passed",
        f"error: rank 0: RuntimeError: {NO_CPU_BACKEND}" if bad else "",
    )


def test_validate_reruns_level4_cpu_tensor_failures_with_gloo(tmp_path, monkeypatch):
    monkeypatch.setattr(vrun, "check_task", _fake_check)
    FakePool.made = []
    out = vrun.validate(
        _manifest(tmp_path), tmp_path / "res.jsonl", backend="nccl", size="full", pool_factory=FakePool, quiet=True
    )
    assert {r.task_id: r.status for r in out} == {CPU_TASK: "passed", OTHER: "passed"}
    assert FakePool.made == [{}, CPU_GLOO_ENV]  # one plain pool, one for the retry
    lines = [json.loads(x) for x in (tmp_path / "res.jsonl").read_text().splitlines()]
    assert sorted(r["task_id"] for r in lines) == sorted([CPU_TASK, OTHER])  # one line per task


def test_validate_does_not_retry_templated_tasks(tmp_path, monkeypatch):
    monkeypatch.setattr(vrun, "check_task", _fake_check)
    FakePool.made = []
    out = vrun.validate(
        _manifest(tmp_path, level=2),
        tmp_path / "res.jsonl",
        backend="nccl",
        size="full",
        pool_factory=FakePool,
        quiet=True,
    )
    assert {r.task_id: r.status for r in out}[CPU_TASK] == "failed" and FakePool.made == [{}]


def test_crosscheck_reruns_cpu_tensor_failures_with_gloo(tmp_path, monkeypatch):
    def fake_crosscheck(pool, t, timeout_s):
        bad = _fails_without_gloo(pool, t["task_id"])
        return (False, f"error: rank 0: RuntimeError: {NO_CPU_BACKEND}") if bad else (True, "ok")

    monkeypatch.setattr(xc, "crosscheck", fake_crosscheck)
    monkeypatch.setattr(xc, "RankPool", FakePool)
    FakePool.made = []
    _manifest(tmp_path)
    recs = xc.run(tmp_path, results=tmp_path / "x.jsonl", quiet=True)
    assert all(r["agree"] for r in recs) and FakePool.made == [{}, CPU_GLOO_ENV]
    assert [r.get("cpu_gloo", False) for r in recs] == [True, False]
    assert len((tmp_path / "x.jsonl").read_text().splitlines()) == 2  # one line per task


def test_crosscheck_resume_retries_old_cpu_tensor_failures(tmp_path, monkeypatch):
    """A record of a CPU-tensor failure from a run without the retry is not final: the next run retries it."""
    monkeypatch.setattr(xc, "crosscheck", lambda pool, t, timeout_s: (True, "ok"))
    monkeypatch.setattr(xc, "RankPool", FakePool)
    _manifest(tmp_path)
    old = [
        {
            "task_id": CPU_TASK,
            "content_hash": CPU_TASK[-4:],
            "world_size": 2,
            "backend": "nccl",
            "agree": False,
            "reason": f"error: rank 0: RuntimeError: {NO_CPU_BACKEND}",
            "repo": "",
        },
        {
            "task_id": OTHER,
            "content_hash": OTHER[-4:],
            "world_size": 2,
            "backend": "nccl",
            "agree": False,
            "reason": "timeout: timed out after 30s",
            "repo": "",
        },
    ]
    (tmp_path / "x.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    FakePool.made = []
    recs = xc.run(tmp_path, results=tmp_path / "x.jsonl", quiet=True)
    assert [r["agree"] for r in recs] == [True, False]  # only the CPU-tensor failure ran again
    assert FakePool.made == [{}]


def test_gpu_pass_reruns_level4_cpu_tensor_failures_with_gloo(tmp_path, monkeypatch):
    """The timed GPU pass (`validate --timing`) retries them too: the first pool writes no failed line for
    the CPU-tensor task, the retry pool checks and times it (it failed there on 2x H200 before)."""
    from mgbench.validation.gpu import run as gpu_run

    monkeypatch.setattr(gpu_run, "check_task", _fake_check)
    monkeypatch.setattr(gpu_run, "RankPool", FakePool)
    monkeypatch.setattr(gpu_run.GpuRun, "hardware", lambda self, pool: {"ceilings": {}})
    timed: list[tuple[str, dict]] = []
    monkeypatch.setattr(
        gpu_run.GpuRun, "time_task", lambda self, pool, t, ws: timed.append((t["task_id"], pool.env)) or "timed"
    )
    FakePool.made = []
    _manifest(tmp_path)
    cfg = gpu_run.GpuRunConfig(
        out=tmp_path, results_dir=tmp_path / "res", hardware_tag="fake", backend="nccl", size="full", quiet=True
    )
    stats = gpu_run.GpuRun(cfg).run()
    assert stats["tasks"] == 2 and [e.get("MGBENCH_CPU_GLOO") for e in FakePool.made] == [None, "1"]
    assert [(t, e.get("MGBENCH_CPU_GLOO")) for t, e in timed] == [(OTHER, None), (CPU_TASK, "1")]
    lines = [json.loads(x) for x in (tmp_path / "res" / "validation-nccl.jsonl").read_text().splitlines()]
    assert [(r["task_id"], r["status"]) for r in lines] == [(OTHER, "passed"), (CPU_TASK, "passed")]


def test_gpu_pass_times_on_the_gloo_pool_a_task_checked_there_before(tmp_path, monkeypatch):
    """A level-4 task whose passing check came from the retry pool in an earlier run (its timing redone now):
    a CPU-tensor timing failure on the plain pool writes nothing, and the task is timed on the retry pool."""
    from mgbench.validation.gpu import run as gpu_run
    from mgbench.validation.pool import JobOutcome

    class TimingPool(FakePool):
        def run(self, job, timeout_s=None):
            if _fails_without_gloo(self, job["task"]):
                return JobOutcome("error", [], f"rank 0: RuntimeError: {NO_CPU_BACKEND}")
            return JobOutcome("error", [], f"timed on pool {self.env.get('MGBENCH_CPU_GLOO', 'plain')}")

    monkeypatch.setattr(gpu_run, "RankPool", TimingPool)
    monkeypatch.setattr(gpu_run.GpuRun, "hardware", lambda self, pool: {"ceilings": {}})
    monkeypatch.setattr(gpu_run.GpuRun, "_job", lambda self, t, record: {"kind": record.kind, "task": t["task_id"]})
    _manifest(tmp_path)
    res = tmp_path / "res"
    res.mkdir()
    passed = [
        {
            "task_id": t,
            "content_hash": t[-4:],
            "world_size": 2,
            "size": "full",
            "backend": "nccl",
            "status": "passed",
            "reason": "",
        }
        for t in (CPU_TASK, OTHER)
    ]
    (res / "validation-nccl.jsonl").write_text("".join(json.dumps(r) + "\n" for r in passed))
    FakePool.made = []
    cfg = gpu_run.GpuRunConfig(
        out=tmp_path, results_dir=res, hardware_tag="fake", backend="nccl", size="full", quiet=True
    )
    gpu_run.GpuRun(cfg).run()
    lines = [json.loads(x) for x in (res / "baselines.jsonl").read_text().splitlines()]
    assert {(r["task_id"], r["reason"]) for r in lines} == {
        (OTHER, "error: timed on pool plain"),
        (CPU_TASK, "error: timed on pool 1"),
    }
    assert [e.get("MGBENCH_CPU_GLOO") for e in FakePool.made] == [None, "1"]
