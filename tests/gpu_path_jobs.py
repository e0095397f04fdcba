"""Rank-side jobs for tests/test_gpu_path_cpu.py (imported in gloo rank processes)."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from probe_jobs import CommProbe, TimingProbe

from mgbench.validation.gpu.roofline import CommCounter, trace_call
from mgbench.validation.timing import time_solution
from mgbench.validation.worker import register


def timing_job(job, ctx):
    """Rank 1 is slower by `extra_ms` per call: the max over ranks must show it on every rank."""
    x = torch.randn(256)

    def fn(t):
        if ctx.rank == 1:
            time.sleep(job.extra_ms / 1e3)
        y = t.clone()
        dist.all_reduce(y)
        return y

    st = time_solution(fn, lambda i: (x.clone(),), device=ctx.device, budget_s=0.3, min_iters=8, max_iters=40)
    return st.to_dict(with_samples=True)


def comm_job(job, ctx):
    """Real collectives and p2p under the counter: bytes per op as the counter saw them."""
    n, r = ctx.world_size, ctx.rank
    x = torch.randn(1000)  # 4000 bytes
    out = {}
    originals = (dist.all_reduce, dist.isend, dist.distributed_c10d.irecv)
    with CommCounter() as cc:
        dist.all_reduce(x.clone())
    out["all_reduce"] = cc.comm_bytes
    with CommCounter() as cc:
        dist.all_gather_into_tensor(torch.empty(n * 1000), x)
    out["all_gather_into_tensor"] = cc.comm_bytes
    with CommCounter() as cc:
        dist.all_gather([torch.empty(1000) for _ in range(n)], x)
    out["all_gather"] = cc.comm_bytes
    with CommCounter() as cc:
        dist.all_to_all_single(torch.empty(n * 1000), torch.randn(n * 1000))
    out["all_to_all_single"] = cc.comm_bytes
    with CommCounter() as cc:
        dist.all_to_all([torch.empty(1000) for _ in range(n)], [torch.randn(1000) for _ in range(n)])
    out["all_to_all"] = cc.comm_bytes
    with CommCounter() as cc:
        y = torch.empty(1000)
        ops = [dist.P2POp(dist.isend, x, (r + 1) % n), dist.P2POp(dist.irecv, y, (r - 1) % n)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
    out["ring_p2p"] = cc.comm_bytes
    with CommCounter() as cc:
        if r == 0:
            dist.send(x, 1)
        elif r == 1:
            dist.recv(torch.empty(1000), 0)
    out["send_recv"] = cc.comm_bytes
    out["restored"] = originals == (dist.all_reduce, dist.isend, dist.distributed_c10d.irecv)
    _, tr = trace_call(lambda a, b: a @ b, (torch.randn(8, 16), torch.randn(16, 4)))
    out["flops"], out["hbm"] = tr.flops, tr.hbm_bytes
    return out


register(TimingProbe, timing_job)
register(CommProbe, comm_job)
