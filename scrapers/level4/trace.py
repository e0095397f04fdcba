"""Trace rendered level-4 task modules at their full size on 2 gloo ranks (`mgbench scrape gate`).

Each task runs as the job kind "level4_trace" (the record mgbench.validation.jobs.TraceJob) on a
mgbench.validation.pool.RankPool (mined code never runs in this process; a hang is killed by the job
timeout and the pool restarted): the rank draws its inputs with make_inputs(size="full") and calls
solution under mgbench.scrapers.level4.tracer.TraceMode. The per-rank traces are appended to a resumable
JSONL keyed by the module's content hash, so a re-run traces only modules it has not seen."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mgbench.scrapers.level4.tracer import trace_call
from mgbench.store import append_jsonl, read_jsonl
from mgbench.validation.jobs import TraceJob
from mgbench.validation.worker import RankContext, register

TRACE_WORLD_SIZE = 2
TRACE_SIZE = "full"


def _trace_job(job: TraceJob, ctx: RankContext) -> dict[str, Any]:
    """One rank: full-size inputs, then the traced call of solution."""
    mod = ctx.module(job.path, job.content_hash)
    inputs = mod.make_inputs(ctx.rank, ctx.world_size, seed=job.seed, device=ctx.device, size=job.size)
    trace, _ = trace_call(mod.solution, inputs)
    return trace.to_json()


register(TraceJob, _trace_job)


@dataclass(frozen=True)
class TraceTarget:
    """A rendered level-4 task module to trace."""

    task_id: str
    content_hash: str
    path: str
    candidate: str
    repo: str


def traced_hashes(trace_path: Path) -> dict[str, dict[str, Any]]:
    """The latest trace record per content hash (the resumable store's index)."""
    return {r["content_hash"]: r for r in read_jsonl(trace_path)}


def trace_record(target: TraceTarget, outcome: Any, world_size: int, size: str) -> dict[str, Any]:
    """The JSONL record of one traced task: status, reason and one trace per rank."""
    ranks = [r["result"] if r and r.get("ok") else None for r in outcome.results]
    return {
        "content_hash": target.content_hash,
        "task_id": target.task_id,
        "candidate": target.candidate,
        "repo": target.repo,
        "world_size": world_size,
        "size": size,
        "status": outcome.status,
        "reason": outcome.reason,
        "ranks": ranks,
        "seconds": round(outcome.seconds, 3),
        "traced_at": round(time.time(), 3),
    }


def trace_tasks(
    targets: Iterable[TraceTarget],
    trace_path: Path | str,
    timeout_s: float = 120.0,
    limit: int | None = None,
    world_size: int = TRACE_WORLD_SIZE,
    size: str = TRACE_SIZE,
    pool_factory: Callable[..., Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Trace the targets not yet in `trace_path` (at most `limit` of them this call); append a record
    per task and return every record of the store by content hash."""
    from mgbench.validation.pool import RankPool

    trace_path = Path(trace_path)
    done = traced_hashes(trace_path)
    todo = [t for t in targets if t.content_hash not in done]
    todo = todo[:limit] if limit is not None else todo
    if not todo:
        return done
    make_pool = pool_factory or (lambda: RankPool(world_size, "gloo", extra_handlers=[__name__]))
    with make_pool() as pool:
        for i, t in enumerate(todo, 1):
            job = TraceJob(path=t.path, content_hash=t.content_hash, size=size, seed=0)
            rec = trace_record(t, pool.run(job, timeout_s), world_size, size)
            append_jsonl(trace_path, rec)
            done[t.content_hash] = rec
            if progress:
                progress(
                    f"[{i}/{len(todo)}] {t.task_id}: {rec['status']}"
                    + (f" ({rec['reason'][:120]})" if rec["reason"] else "")
                )
    return done
