"""Rank-side job for tests/test_pool_streaming.py (imported in gloo rank processes): one rank's job fails
while the others enter a collective."""

from __future__ import annotations

import torch
import torch.distributed as dist
from probe_jobs import FailOnRankProbe

from mgbench.validation.worker import register


def _fail_on_rank(job: FailOnRankProbe, ctx) -> dict:
    if job.fail_rank in (-1, ctx.rank):
        raise MemoryError(f"rank {ctx.rank} ran out of memory")
    t = torch.ones(1 << 10)
    dist.all_reduce(t)  # waits for the failed rank, which never joins
    return {"sum": float(t[0])}


register(FailOnRankProbe, _fail_on_rank)
