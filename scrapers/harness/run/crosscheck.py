"""gloo-CPU vs NCCL-GPU agreement of level-4 tasks (`mgbench scrape crosscheck`).

The harness search records, per rank, a fingerprint of the smoke outputs on gloo (sum, max |x|,
nonzero count, hash) in the manifest (`harness_fingerprints`). On a GPU pool, the job kind
"mined_fingerprint" (pass this module in RankPool(extra_handlers=[...])) recomputes it with NCCL,
and `agree` compares: same tensor count and nonzero count, sums/max within a float tolerance
(bit-identical hashes are not expected across backends)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from mgbench.report import Progress, table
from mgbench.scrapers.harness.run.probe import fingerprint
from mgbench.store import append_jsonl, load_manifest, read_jsonl
from mgbench.validation.jobs import FingerprintJob
from mgbench.validation.pool import RankPool, has_cpu_group, needs_cpu_group, with_cpu_group_retry
from mgbench.validation.worker import RankContext, register


def _fingerprint_job(job: FingerprintJob, ctx: RankContext) -> dict[str, Any]:
    mod = ctx.module(job.path, job.content_hash)
    inputs = mod.make_inputs(ctx.rank, ctx.world_size, seed=job.seed, device=ctx.device, size="smoke")
    return fingerprint(mod.solution(*inputs))


register(FingerprintJob, _fingerprint_job)


def agree(ref: dict[str, Any], got: dict[str, Any], rtol: float = 1e-4) -> tuple[bool, str]:
    """Whether a rank's fingerprint on another backend matches the recorded gloo one."""
    if ref["tensors"] != got["tensors"] or ref["nonzero"] != got["nonzero"]:
        return False, f"structure differs ({ref['tensors']}/{ref['nonzero']} vs {got['tensors']}/{got['nonzero']})"
    scale = max(ref["absmax"], 1e-12)
    for k in ("sum", "absmax"):
        if not math.isclose(ref[k], got[k], rel_tol=rtol, abs_tol=rtol * scale * max(1, ref["nonzero"]) ** 0.5):
            return False, f"{k} {got[k]:.6g} vs gloo {ref[k]:.6g}"
    return True, "ok"


def crosscheck(pool: Any, task: dict[str, Any], timeout_s: float = 60.0) -> tuple[bool, str]:
    """Run one manifest task's smoke size on `pool` and compare every rank with the gloo record."""
    ref = task.get("harness_fingerprints", {}).get(f"ws{pool.world_size}")
    if not ref:
        return False, f"no gloo fingerprint at world size {pool.world_size}"
    oc = pool.run(FingerprintJob(path=task["_path"], content_hash=task["content_hash"]), timeout_s)
    if oc.status != "ok":
        return False, f"{oc.status}: {oc.reason}"
    for r, (want, rep) in enumerate(zip(ref, oc.results)):
        ok, why = agree(want, rep["result"])
        if not ok:
            return False, f"rank {r}: {why}"
    return True, "ok"


def run(
    out: Path,
    world_size: int = 2,
    backend: str = "nccl",
    results: Path | None = None,
    timeout_s: float = 60.0,
    quiet: bool = False,
) -> list[dict[str, Any]]:
    """Cross-check every level-4 task of OUT's manifest on a `backend` pool; resumable JSONL records."""
    results = Path(results or Path(out) / "results" / f"crosscheck-{backend}.jsonl")
    tasks = [t for t in load_manifest(out) if t.get("level") == 4]
    done = {
        (r["task_id"], r["content_hash"], r["world_size"], r["backend"]): r
        for r in (read_jsonl(results) if results.exists() else [])
        if r.get("cpu_gloo") or not needs_cpu_group(r["backend"], r["reason"])
    }  # older runs: retry those
    todo = [t for t in tasks if (t["task_id"], t["content_hash"], world_size, backend) not in done]
    if todo:
        prog = Progress(len(todo), f"crosscheck ws={world_size} {backend}")

        def open_pool(**kw: Any) -> RankPool:
            return RankPool(world_size, backend, extra_handlers=["mgbench.scrapers.harness.run.crosscheck"], **kw)

        # mined code that puts CPU tensors through collectives gets gloo for them on a second pool
        for t, rec in with_cpu_group_retry(
            open_pool,
            todo,
            lambda pool, t: _record(pool, t, timeout_s),
            lambda t, rec: needs_cpu_group(backend, rec["reason"]),
        ):
            append_jsonl(results, rec)
            done[(t["task_id"], t["content_hash"], world_size, backend)] = rec
            if not quiet:
                prog.step(t["task_id"], "agrees" if rec["agree"] else f"DIFFERS: {rec['reason']}")
    recs = [done[(t["task_id"], t["content_hash"], world_size, backend)] for t in tasks]
    if not quiet:
        print(summary(recs))
    return recs


def _record(pool: Any, t: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    t0 = time.monotonic()
    ok, why = crosscheck(pool, t, timeout_s)
    rec = {
        "task_id": t["task_id"],
        "content_hash": t["content_hash"],
        "world_size": pool.world_size,
        "backend": pool.backend,
        "agree": ok,
        "reason": why,
        "repo": (t.get("provenance") or {}).get("repository", ""),
        "seconds": round(time.monotonic() - t0, 3),
        "measured_at": round(time.time(), 3),
    }
    return {**rec, "cpu_gloo": True} if has_cpu_group(pool) else rec


def summary(recs: list[dict[str, Any]]) -> str:
    """Per-repository agreement table plus the disagreeing tasks."""
    by: dict[str, list[int]] = {}
    for r in recs:
        by.setdefault(r["repo"] or "?", [0, 0])[0 if r["agree"] else 1] += 1
    rows = [(k, a + d, a, d) for k, (a, d) in sorted(by.items())]
    rows.append(("total", len(recs), sum(r["agree"] for r in recs), sum(not r["agree"] for r in recs)))
    lines = [table(rows, ["repository", "tasks", "agree", "differ"])]
    lines += [f"DIFFERS {r['task_id']}: {r['reason']}" for r in recs if not r["agree"]]
    return "\n".join(lines)
