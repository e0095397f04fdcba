"""Rank-side job for tests/test_shared_gpu.py (imported in gloo rank processes): the oracle as ranks sharing one
GPU compute it, with a stand-in task module whose oracle records where and when it ran."""

from __future__ import annotations

import pickle
import time
import types

import torch
from probe_jobs import OracleTurnsProbe

from mgbench.validation.checks import expected_output
from mgbench.validation.worker import register


def _module(fail_rank: int, rank: int, windows: list, broken: str = "") -> types.SimpleNamespace:
    def make_inputs(r, world_size, *, seed, device, size="full"):
        return (torch.full((4,), float(r + seed), device=device),)

    def oracle(inputs_per_rank, world_size):
        start = time.monotonic()
        if rank == fail_rank:
            raise MemoryError("the unsharded problem does not fit")
        time.sleep(0.2)  # long enough that overlapping turns would show
        windows.append((start, time.monotonic()))
        total = sum(inp[0].double() for inp in inputs_per_rank)
        # views of one tensor, as oracles return, beside a second leaf of another dtype and a plain int
        parts = [(total[:2] * (r + 1), torch.arange(3, dtype=torch.int8) + r, r) for r in range(world_size)]
        if broken == "short":  # one part too few
            return parts[:-1]
        if broken == "unpicklable":  # a leaf scatter_object_list cannot send
            return [(*part, lambda: None) for part in parts]
        return parts

    return types.SimpleNamespace(make_inputs=make_inputs, oracle=oracle)


def oracle_turns_job(job, ctx):
    from mgbench.validation import checks

    checks.HANDOFF_BYTES_PER_S = job.handoff_bytes_per_s
    windows: list = []
    mod = _module(job.fail_rank, ctx.rank, windows, job.broken)
    inputs = mod.make_inputs(ctx.rank, ctx.world_size, seed=1, device=ctx.device)
    try:
        out = expected_output(mod, inputs, ctx.rank, ctx.world_size, ctx.device, "smoke", 1, in_turns=True)
    except (MemoryError, RuntimeError, ValueError, AttributeError, pickle.PicklingError) as e:
        return {"rank": ctx.rank, "error": str(e), "windows": windows}
    out, extra, tag = out
    base = out._base if out._base is not None else out
    return {
        "rank": ctx.rank,
        "out": out.tolist(),
        "extra": extra.tolist(),
        "tag": tag,
        "own_storage": base.numel() == out.numel(),
        "windows": windows,
    }


register(OracleTurnsProbe, oracle_turns_job)
