"""Rank-side jobs for tests/test_shared_gpu.py (imported in gloo rank processes): point-to-point staged
through host memory for EVERY tensor, so that the shared-gpu backend's staging path runs on CPU."""

from __future__ import annotations

import torch
import torch.distributed as dist
from probe_jobs import P2PPatternsProbe, StagedCallsProbe

from mgbench.validation import p2p_staging
from mgbench.validation.worker import register

p2p_staging.install(stage_if=lambda tensor: True)


def _ring(ctx) -> tuple[int, int]:
    return (ctx.rank + 1) % ctx.world_size, (ctx.rank - 1) % ctx.world_size


def p2p_patterns_job(job, ctx):
    """A ring shift three ways (blocking send/recv, isend/irecv, batch_isend_irecv of P2POps), on a
    non-contiguous source and into a non-contiguous destination; what each received."""
    nxt, prv = _ring(ctx)
    n = job.n
    base = torch.arange(2 * n, dtype=getattr(torch, job.dtype)).reshape(n, 2) + 1000 * ctx.rank
    src = base[:, 0]  # a strided view: the host copy must be contiguous
    got = {}
    dst = torch.zeros(n, 2, dtype=base.dtype)[:, 1]
    if ctx.rank % 2 == 0:
        dist.send(src, nxt)
        dist.recv(dst, prv)
    else:
        dist.recv(dst, prv)
        dist.send(src, nxt)
    got["send_recv"] = dst.tolist()
    dst = torch.zeros(n, dtype=base.dtype)
    works = [dist.isend(src, nxt), dist.irecv(dst, prv)]
    for w in works:
        w.wait()
    got["isend_irecv"] = dst.tolist()
    dst = torch.zeros(n, dtype=base.dtype)
    ops = [dist.P2POp(dist.isend, src, nxt), dist.P2POp(dist.irecv, dst, prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    got["batch"] = dst.tolist()
    # the list form of all-to-all (gloo in torch 2.11 has none): rank r sends peer p the value 10 r + p
    outs = [torch.zeros(2, dtype=base.dtype) for _ in range(ctx.world_size)]
    ins = [torch.full((2,), 10 * ctx.rank + p, dtype=base.dtype) for p in range(ctx.world_size)]
    dist.all_to_all(outs, ins)
    got["all_to_all"] = [o.tolist() for o in outs]
    expected = (torch.arange(2 * n, dtype=base.dtype).reshape(n, 2)[:, 0] + 1000 * prv).tolist()
    return {"rank": ctx.rank, "got": got, "expected": expected, "staged": dict(p2p_staging.STAGED_CALLS)}


def staged_calls_job(job, ctx):
    return dict(p2p_staging.STAGED_CALLS)


register(P2PPatternsProbe, p2p_patterns_job)
register(StagedCallsProbe, staged_calls_job)
