"""Rank-side jobs of the GPU pass, registered into mgbench.validation.worker.HANDLERS on import
(their records are in mgbench.validation.jobs):

- "time" (TimeJob): trace one call (FLOPs, HBM and communication bytes), record peak memory, time the
  eager reference and the null candidate (the same reference timed again, independently) in
  ABBA blocks, the order in which `mgbench eval` times reference and candidate.
- "baseline" (BaselineJob): build one baseline (torch.compile, a symmetric-memory version), check its output
  against the reference's within the task tolerance, time it.
- "ceilings" (CeilingsJob): measure this rank's hardware ceilings (mgbench.validation.gpu.ceilings).

Pass "mgbench.validation.gpu.handlers" in RankPool(extra_handlers=[...]).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import torch
import torch.distributed as dist

from mgbench.validation.checks import clone_tree
from mgbench.validation.compare import Tolerance, compare
from mgbench.validation.eval.outcome import combine_runs
from mgbench.validation.gpu import baselines, ceilings
from mgbench.validation.gpu.roofline import trace_call
from mgbench.validation.jobs import BaselineJob, CeilingsJob, TimeJob
from mgbench.validation.timing import time_solution
from mgbench.validation.worker import RankContext, register


def rotation(inputs: tuple) -> Callable[[int], tuple]:
    """make_args for time_solution: copy 0 is the inputs themselves, the others clones, made once
    (timings that share a rotation reuse its copies)."""
    cache: dict[int, tuple] = {0: inputs}
    return lambda i: cache[i] if i in cache else cache.setdefault(i, clone_tree(inputs))


class PeakMemory:
    """Peak bytes allocated on this rank's GPU inside the block, above what was held before."""

    def __init__(self, device: torch.device):
        self.device, self.cuda, self.bytes = device, device.type == "cuda", 0

    def __enter__(self) -> PeakMemory:
        if self.cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)
            self.bytes = int(torch.cuda.max_memory_allocated(self.device) - self.base)


def _inputs(job: TimeJob | BaselineJob, ctx: RankContext) -> tuple[Any, tuple]:
    mod = ctx.module(job.path, job.content_hash)
    return mod, mod.make_inputs(ctx.rank, ctx.world_size, seed=job.seed, device=ctx.device, size=job.size)


def _cleanup(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def time_job(job: TimeJob, ctx: RankContext) -> dict[str, Any]:
    """Roofline trace, peak memory, eager timing and null-candidate timing of one task."""
    t0 = time.perf_counter()
    with PeakMemory(ctx.device) as peak:
        mod, inputs = _inputs(job, ctx)
        out, trace = trace_call(mod.solution, inputs)
    del out
    budget = float(job.budget_s)
    res: dict[str, Any] = {"trace": asdict(trace), "peak_mem_bytes": peak.bytes}
    copies = rotation(inputs)
    if job.null:  # eager, null, null, eager: a drift of the machine cancels in the means
        blocks = [
            time_solution(mod.solution, copies, device=ctx.device, budget_s=budget / 2, min_iters=5).to_dict(True)
        ]
        blocks += [
            time_solution(
                mod.solution, copies, device=ctx.device, budget_s=budget / 2, min_iters=5, warm_from=blocks[0]
            ).to_dict(True)
            for _ in range(3)
        ]
        for name, pair in (("eager", [blocks[0], blocks[3]]), ("null", blocks[1:3])):
            res[name] = {**combine_runs(pair), "per_iter_ms": pair[0]["per_iter_ms"] + pair[1]["per_iter_ms"]}
    else:
        res["eager"] = time_solution(mod.solution, copies, device=ctx.device, budget_s=budget).to_dict(True)
    del inputs, copies
    _cleanup(ctx.device)
    res["seconds"] = time.perf_counter() - t0
    return res


def _agree_all(ok: bool, device: torch.device) -> bool:
    t = torch.tensor([1 if ok else 0], dtype=torch.int32, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return bool(t.item())


def baseline_job(job: BaselineJob, ctx: RankContext) -> dict[str, Any]:
    """Build, check and time one baseline. A build error propagates (the pool records it)."""
    t0 = time.perf_counter()
    mod, inputs = _inputs(job, ctx)
    ref = clone_tree(mod.solution(*inputs))
    try:
        built = baselines.build(job.baseline, mod, inputs, job.task, ctx.device)
    except baselines.NotApplicable as e:
        return {"status": baselines.NOT_APPLICABLE, "reason": str(e)}
    with PeakMemory(ctx.device) as peak:
        out = built.fn(*inputs)
    tol = Tolerance(**job.tolerance) if job.tolerance else None
    ok, why = compare(out, ref, tol)
    del out
    if not _agree_all(ok, ctx.device):
        return {
            "status": "failed",
            "reason": f"output differs from the reference: {why}"
            if not ok
            else "output differs from the reference on another rank",
        }
    stats = time_solution(built.fn, rotation(inputs), device=ctx.device, budget_s=float(job.budget_s))
    setup_s = built.setup_s
    del built, inputs, ref
    _cleanup(ctx.device)
    return {
        "status": "ok",
        "reason": "",
        "stats": stats.to_dict(),
        "peak_mem_bytes": peak.bytes,
        "setup_s": round(setup_s, 3),
        "seconds": time.perf_counter() - t0,
    }


def ceilings_job(job: CeilingsJob, ctx: RankContext) -> dict[str, Any]:
    return ceilings.measure(ctx.rank, ctx.world_size, ctx.device)


register(TimeJob, time_job)
register(BaselineJob, baseline_job)
register(CeilingsJob, ceilings_job)
