"""Rank-side job handlers of `mgbench eval`; imported in rank processes (RankPool extra_handlers).

Jobs, in order, on a pool started for one candidate (records EvalSetupJob, EvalTrialJob, EvalTimeJob of
mgbench.validation.jobs):
  eval_setup  load the task from its source text (never entered in sys.modules), hide and block the
              harness, snapshot the functions it relies on, then load the candidate file.
  eval_trial  one correctness trial with a fresh seed (every trial checks every rank). The candidate
              runs first, the reference after it: no answer for these inputs exists in memory (freed
              or not) while the candidate runs (KernelBench issue 38's stale-buffer exploit).
  eval_time   time the reference or the candidate with mgbench.validation.timing (same method as baselines),
              with mgbench.validation.eval.timed checking timed calls outside the timed regions.
Candidate exceptions are raised as CandidateError (the pool reports them with the rank); every other
verdict comes back as data: {"reason": "" | why it is rejected, "flags": [...], ...}.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch
import torch.distributed as dist

from mgbench.validation.checks import clone_tree, tensors_of
from mgbench.validation.compare import Tolerance, calibrate, computation_ceiling, default_tolerance, dtype_name
from mgbench.validation.contract import check_contract
from mgbench.validation.eval import audit, guard, rankchecks, timed
from mgbench.validation.eval.guard import CandidateError
from mgbench.validation.jobs import EvalSetupJob, EvalTimeJob, EvalTrialJob
from mgbench.validation.worker import RankContext, register

try:  # the timing method shared with the baselines
    from mgbench.validation import timing as _timing
except ImportError:  # pragma: no cover - reported by the eval_time job
    _timing = None


@dataclass
class EvalState:
    task: ModuleType
    solution: Callable
    filename: str
    integrity: guard.Integrity
    audit: audit.AuditLog
    prev: tuple[Any, Any] | None = None  # (output, snapshot at return) of the last trial
    flags: list[str] = field(default_factory=list)
    tol: Any = None  # the last trial's Tolerance (timed calls use it)


_STATE: EvalState | None = None


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _agree_max(value: float, device: torch.device) -> float:
    t = torch.tensor([value if value == value and value != float("inf") else 1e30], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def _float_dtype(out: Any) -> str:
    floats = [t for t in tensors_of(out) if t.is_floating_point() or t.is_complex()]
    return dtype_name(floats[0]) if floats else "float32"


def _integrity_reason(st: EvalState, when: str, left: list[str] | None = None) -> str:
    """Reason if candidate code reflected on, patched or called into the harness (named rule)."""
    if st.audit.refused:
        return rankchecks.rule("introspection", f"{when}: {st.audit.reason()}")
    if left:
        return rankchecks.rule(
            "dispatch_override",
            f"{when}: solution() left {', '.join(left)} installed (it would run inside the harness's checks)",
        )
    ops = st.integrity.dispatch_violations()
    if ops:
        return rankchecks.rule(
            "dispatch_override",
            f"{when}: candidate code registered kernels over {', '.join(ops[:3])} (operators the checks use)",
        )
    bad = st.integrity.violations()
    if bad:
        more = f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""
        return rankchecks.rule(
            "monkeypatch", f"{when}: candidate code replaced {', '.join(bad[:3])}{more} (monkeypatching the harness)"
        )
    if guard.RefWatch.hits:
        return rankchecks.rule(
            "reference_call", f"{when}: candidate code called the reference task's {guard.RefWatch.hits[0]}()"
        )
    return ""


def _setup(job: EvalSetupJob, ctx: RankContext) -> dict[str, Any]:
    global _STATE
    task = guard.load_source(job.task_source, "<mgbench task>", register=False)
    check_contract(task, "task", need_oracle=job.has_oracle)
    guard.watch_task(task)
    hidden, blocker = guard.hide_harness()
    integrity = guard.Integrity({f"harness:{k}": m for k, m in hidden.items()}, blocker)
    filename = job.filename
    log = audit.install(filename)  # from here on, frame and gc walks from candidate code fail
    mod = guard.candidate_call(
        guard.load_source, (job.cand_source, filename, True), "importing the solution file", filename, log.refused
    )
    left = guard.left_behind()
    fn = getattr(mod, "solution", None)
    if not callable(fn):
        raise CandidateError("the solution file defines no callable solution(...)")
    _STATE = EvalState(task, fn, filename, integrity, log)
    return {"reason": _integrity_reason(_STATE, "at import", left), "flags": []}


def _expected(st: EvalState, job: EvalTrialJob, ctx: RankContext, inputs: tuple, ref_out: Any) -> tuple[Any, Tolerance]:
    """Expected outputs (oracle, else the reference) and the tolerance, agreed across ranks."""
    rec = job.tolerance or {}
    dtype = _float_dtype(ref_out)
    base = default_tolerance(dtype)
    rtol = rec.get("rtol") if rec.get("rtol") is not None else base.rtol
    atol = rec.get("atol_rel") if rec.get("atol_rel") is not None else base.atol_rel
    if not job.has_oracle:
        return ref_out, Tolerance(rtol, atol)
    all_inputs = [
        inputs
        if r == ctx.rank
        else st.task.make_inputs(r, ctx.world_size, seed=job.seed, device=ctx.device, size=job.size)
        for r in range(ctx.world_size)
    ]
    expected = st.task.oracle(all_inputs, ctx.world_size)[ctx.rank]
    calibrated, _ = calibrate(ref_out, expected, dtype)  # the reference's own error on these inputs
    atol = min(max(atol, _agree_max(calibrated.atol_rel, ctx.device)), computation_ceiling(inputs, ref_out))
    return expected, Tolerance(rtol, atol)


def _scrub(out: Any) -> None:
    """Overwrite the reference's raw outputs before they are freed (NaN / -1), so that memory
    handed out later holds no answer."""
    with torch.no_grad():
        for t in tensors_of(out):
            if t.numel():
                t.fill_(float("nan") if t.is_floating_point() or t.is_complex() else -1)


def _trial(job: EvalTrialJob, ctx: RankContext) -> dict[str, Any]:
    st = _STATE
    assert st is not None, "eval_setup must run first"
    inputs = st.task.make_inputs(ctx.rank, ctx.world_size, seed=job.seed, device=ctx.device, size=job.size)
    cand_in = clone_tree(inputs)
    threads = guard.thread_idents()
    _sync(ctx.device)
    out = guard.candidate_call(st.solution, cand_in, "solution()", st.filename, st.audit.refused)
    left = guard.left_behind()  # before any harness tensor operation
    plain = rankchecks.plain_outputs(out, ctx.device)
    snap = clone_tree(out) if not plain else None  # what a consumer on the current stream sees now
    _sync(ctx.device)
    threads_left = guard.candidate_threads(threads)
    raw = st.task.solution(*clone_tree(inputs))  # after the candidate: every rank, in step
    ref_out = clone_tree(raw)
    _scrub(raw)
    del raw
    expected, tol = _expected(st, job, ctx, inputs, ref_out)
    st.tol = tol
    if plain:
        out = None  # never touched by the checks
    checks = [
        lambda: _integrity_reason(st, "during solution()", left),
        lambda: plain,
        lambda: rankchecks.layout(out, ref_out),
        lambda: rankchecks.aliasing(out, cand_in, "input {i}"),
        lambda: rankchecks.self_aliasing(out),
        lambda: (
            rankchecks.aliasing(out, st.prev[0], "the output of the previous call (a reused buffer)", "reused_buffer")
            if st.prev
            else ""
        ),
        lambda: rankchecks.mutated(inputs, cand_in),
        lambda: (
            rankchecks.rule(
                "late_write",
                "the output returned by the previous call was modified "
                "afterwards (returned a reused or shared buffer, or work continued after "
                "returning)",
            )
            if st.prev and not rankchecks.same_bits(st.prev[1], st.prev[0])
            else ""
        ),
        lambda: rankchecks.nonfinite(snap, expected),
        lambda: rankchecks.values(snap, out, expected, tol, exact_dtype=not job.has_oracle),
    ]
    reason = next((r for r in (c() for c in checks) if r), "")
    flags = (
        [f"solution() left {len(threads_left)} thread(s) running after it returned: {', '.join(threads_left[:3])}"]
        if threads_left
        else []
    )
    if reason and threads_left:
        reason += f" [{flags[0]}]"
    st.prev = (out, snap) if not plain else None
    err = rankchecks.max_excess(snap, expected, tol.rtol) if not reason else None
    return {"reason": reason, "flags": flags, "atol_rel": tol.atol_rel, "rtol": tol.rtol, "max_error": err}


def _synced_ms(fn: Callable, sets: list[tuple], n: int, device: torch.device) -> float:
    """Median wall time of n calls, each bracketed by a whole-device synchronize (max over ranks)."""
    times = []
    for i in range(n):
        _sync(device)
        dist.barrier()
        t0 = time.perf_counter()
        fn(*sets[i % len(sets)])
        torch.cuda.synchronize(device)
        times.append((time.perf_counter() - t0) * 1e3)
    t = torch.tensor(times, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return statistics.median(t.tolist())


def _time(job: EvalTimeJob, ctx: RankContext) -> dict[str, Any]:
    st = _STATE
    assert st is not None, "eval_setup must run first"
    if _timing is None:
        raise RuntimeError("mgbench.validation.timing is not available in this checkout")
    cand = job.which == "candidate"
    fn = st.solution if cand else st.task.solution
    check = timed.TimedCheck(
        st.task.solution,
        ctx.device,
        timed.widened(st.tol) if st.tol else None,
        random.Random(job.seed if job.verify_seed is None else job.verify_seed),
        guard.harness_code,
        rate=timed.VERIFY_RATE if job.verify_rate is None else job.verify_rate,
    )

    def make_args(i: int) -> tuple:  # harness work: not a candidate call of the reference
        return st.task.make_inputs(ctx.rank, ctx.world_size, seed=job.seed + i, device=ctx.device, size=job.size)

    guard.RefWatch.active = cand
    try:
        stats = _timing.time_solution(
            check.wrap(fn),
            check.make_args(make_args),
            device=ctx.device,
            budget_s=job.budget_s,
            min_iters=job.min_iters,
            after_region=check.after_region,
            distinct_in_region=True,
        )
        synced = None
        if ctx.device.type == "cuda":  # cross-check: events on the current stream vs whole-device sync
            with guard.harness_code():
                sets = [make_args(10_000), make_args(10_001)]
            synced = _synced_ms(fn, sets, job.sync_iters, ctx.device)
    except CandidateError:
        raise
    except Exception as e:  # noqa: BLE001
        if not cand:
            raise
        if st.audit.refused:
            raise guard.CandidateRejected(f"while timed: {_integrity_reason(st, 'solution()')}") from None
        raise CandidateError(
            f"solution() raised {type(e).__name__} while being timed: "
            f"{str(e).strip()[:200]} (at {guard.where(e, st.filename)})"
        ) from None
    finally:
        guard.RefWatch.active = False
    left = guard.left_behind()
    if not cand and check.reason:  # the harness's own consistency, not a verdict
        raise RuntimeError(f"the reference failed the timed-call check itself: {check.reason}")
    reason = (
        (_integrity_reason(st, "while timed", left) or (f"while timed: {check.reason}" if check.reason else ""))
        if cand
        else ""
    )
    return {"stats": stats.to_dict(), "synced_ms": synced, "timed_checks": check.to_dict(), "reason": reason}


register(EvalSetupJob, _setup)
register(EvalTrialJob, _trial)
register(EvalTimeJob, _time)
