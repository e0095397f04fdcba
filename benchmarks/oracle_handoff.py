"""Cost of handing each rank its part of the float64 oracle when ranks share a GPU (issue #45).

Rank 0 solves the unsharded problem once (validation/checks.py::expected_output) and hands every other
rank its part through host memory. This prints, for parts of a few sizes, the seconds of that handoff
(a small skeleton by scatter_object_list, then each tensor's raw bytes by isend/irecv into one receive
buffer) beside pickling the parts whole through scatter_object_list, the first form it took. gloo on CPU
tensors on both sides: on a GPU machine the handoff runs on the host the same way, plus the copies from
rank 0's GPU and to each rank's, which this does not measure. A harness cost figure, not a timing result.

  PYTHONPATH=. python3 benchmarks/oracle_handoff.py [--world-size 4] [--mib 16 --mib 128]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import types
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mgbench.report import table  # noqa: E402
from mgbench.validation.pool import free_port  # noqa: E402


def _stand_in(mib: int) -> types.SimpleNamespace:
    """A task whose oracle returns `mib` MiB of float64 per rank (and an int leaf), at no compute cost."""
    n = mib * 2**20 // 8

    def make_inputs(rank, world_size, *, seed, device, size="full"):
        return (torch.full((1,), float(rank), device=device),)

    def oracle(inputs_per_rank, world_size):
        return [(torch.full((n,), float(r), dtype=torch.float64), r) for r in range(world_size)]

    return types.SimpleNamespace(make_inputs=make_inputs, oracle=oracle)


def _rank(rank: int, world_size: int, port: int, sizes: list[int], times: dict) -> None:
    from mgbench.validation import checks
    from mgbench.validation.checks import expected_output

    checks.HANDOFF_BYTES_PER_S = float("inf")  # always hand out (the stand-in's solve costs nothing)

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    cpu = torch.device("cpu")
    for mib in sizes:
        mod = _stand_in(mib)
        inputs = mod.make_inputs(rank, world_size, seed=0, device=cpu)
        dist.barrier()
        t0 = time.perf_counter()
        part = expected_output(mod, inputs, rank, world_size, cpu, "full", 0, in_turns=True)
        dist.barrier()
        handoff = time.perf_counter() - t0
        assert part[1] == rank and float(part[0][0]) == rank
        parts = mod.oracle(None, world_size) if rank == 0 else None
        dist.barrier()
        t0 = time.perf_counter()
        received: list = [None]
        dist.scatter_object_list(received, parts, src=0)
        dist.barrier()
        pickled = time.perf_counter() - t0
        if rank == 0:
            times[mib] = (handoff, pickled)
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--world-size", type=int, default=4)
    p.add_argument("--mib", type=int, action="append", help="MiB of float64 per rank's part (repeatable)")
    args = p.parse_args()
    sizes = args.mib or [16, 128]
    with mp.Manager() as manager:
        times = manager.dict()
        mp.spawn(_rank, args=(args.world_size, free_port(), sizes, times), nprocs=args.world_size)
        rows = [
            [mib, args.world_size, f"{h:.2f}", f"{pk:.2f}", f"{pk / h:.1f}x"] for mib, (h, pk) in sorted(times.items())
        ]
    print(table(rows, ["MiB per part", "ranks", "handoff s", "pickled s", "pickled / handoff"]))


if __name__ == "__main__":
    main()
