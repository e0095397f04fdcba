"""gloo-CPU vs NCCL-GPU agreement of level-4 tasks (UNTESTED ON GPU in the session that wrote it).

The harness search records, per rank, a fingerprint of the smoke outputs on gloo (sum, max |x|,
nonzero count, hash) in the manifest (`harness_fingerprints`). On a GPU pool, the job kind
"mined_fingerprint" (pass this module in RankPool(extra_handlers=[...])) recomputes it with NCCL,
and `agree` compares: same tensor count and nonzero count, sums/max within a float tolerance
(bit-identical hashes are not expected across backends)."""
from __future__ import annotations

import math
from typing import Any

from scrapers.harness.probe import fingerprint
from validation.worker import RankContext, register


def _fingerprint_job(job: dict[str, Any], ctx: RankContext) -> dict[str, Any]:
    mod = ctx.module(job["path"], job.get("content_hash", ""))
    inputs = mod.make_inputs(ctx.rank, ctx.world_size, seed=job.get("seed", 0), device=ctx.device, size="smoke")
    return fingerprint(mod.solution(*inputs))


register("mined_fingerprint", _fingerprint_job)


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
    oc = pool.run({"kind": "mined_fingerprint", "path": task["_path"], "content_hash": task["content_hash"]},
                  timeout_s)
    if oc.status != "ok":
        return False, f"{oc.status}: {oc.reason}"
    for r, (want, rep) in enumerate(zip(ref, oc.results)):
        ok, why = agree(want, rep["result"])
        if not ok:
            return False, f"rank {r}: {why}"
    return True, "ok"
