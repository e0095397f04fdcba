"""Rank-side job for tests/test_plans2d.py (imported in gloo rank processes): process groups
created by the first and by later calls of a 2-D plan task's solution."""

from __future__ import annotations

import itertools

import torch.distributed.distributed_c10d as c10d
from probe_jobs import MeshGroupsProbe

from mgbench.validation.contract import load_module
from mgbench.validation.worker import register

_fresh = itertools.count()


def _groups() -> int:
    return len(c10d._world.pg_map)


def mesh_groups_job(job, ctx):
    """Load a fresh copy of the module, call solution three times; count new process groups."""
    mod = load_module(job.path, name=f"plans2d_probe_{next(_fresh)}")
    inputs = mod.make_inputs(ctx.rank, ctx.world_size, seed=0, device=ctx.device, size="smoke")
    before = _groups()
    mod.solution(*inputs)
    first = _groups()
    mod.solution(*inputs)
    mod.solution(*inputs)
    return {"first_call": first - before, "later_calls": _groups() - first}


register(MeshGroupsProbe, mesh_groups_job)
