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
        # views into one storage each, as oracles return (at an offset; the second one strided), beside a
        # leaf of another dtype and a plain int
        stacked = torch.stack([total * (r + 1) for r in range(world_size)])
        small = torch.arange(3, dtype=torch.int8, device=total.device)[:, None] + torch.arange(
            world_size, dtype=torch.int8, device=total.device
        )
        parts = [(stacked[r, :2], small[:, r], r) for r in range(world_size)]
        if broken == "short":  # one part too few
            return parts[:-1]
        if broken == "unpicklable":  # a leaf scatter_object_list cannot send
            return [(*part, lambda: None) for part in parts]
        return parts

    return types.SimpleNamespace(make_inputs=make_inputs, oracle=oracle)


class FileTransport:
    """A CPU stand-in for CUDA IPC: the handle names a file rank 0 wrote, the receiver copies its part out
    of it (as a CUDA IPC receiver copies out of rank 0's memory); opens are counted."""

    name = "test-file"

    def __init__(self, rank: int, fails_on: int = -1) -> None:
        self.rank, self.fails_on = rank, fails_on
        self.opened = 0

    def shareable(self, tensor):
        return tensor.device.type == "cpu"

    def share(self, part):
        import os
        import tempfile

        fd, path = tempfile.mkstemp(suffix=".pt")
        os.close(fd)
        torch.save(part, path)
        return path.encode()

    def open(self, blob, device):
        import os

        from mgbench.validation.part_transport import copy_tree

        if self.rank == self.fails_on:
            raise OSError("cannot map the handle here")
        part = copy_tree(torch.load(blob.decode()), device)
        os.unlink(blob.decode())
        self.opened += 1
        return part


class Counting:
    """The device's own transport (CUDA IPC on a GPU), its opens counted."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.opened = inner, inner.name, 0

    def shareable(self, tensor):
        return self.inner.shareable(tensor)

    def share(self, part):
        return self.inner.share(part)

    def open(self, blob, device):
        part = self.inner.open(blob, device)
        self.opened += 1  # only an open that delivered
        return part


def oracle_turns_job(job, ctx):
    from mgbench.validation import checks, part_transport

    checks.HANDOFF_BYTES_PER_S = job.handoff_bytes_per_s
    checks.HANDOFF = job.handoff
    part_transport.GIVEN_UP.clear()  # a fallback in an earlier job of this pool gave the transport up
    transport = None
    if job.transport == "count":
        real = part_transport.TRANSPORTS[ctx.device.type]
        transport = part_transport.TRANSPORTS[ctx.device.type] = Counting(getattr(real, "inner", real))
    elif job.transport:
        fails_on = int(job.transport.rsplit("-", 1)[1]) if "fails-on" in job.transport else -1
        transport = FileTransport(ctx.rank, fails_on)
        part_transport.TRANSPORTS["cpu"] = transport
    else:
        part_transport.TRANSPORTS.pop("cpu", None)
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
        "opened": transport.opened if transport else 0,
        "route": checks.LAST_ROUTE,
        "out": out.tolist(),
        "extra": extra.tolist(),
        "tag": tag,
        "own_storage": base.numel() == out.numel(),
        "windows": windows,
    }


register(OracleTurnsProbe, oracle_turns_job)
