"""Host time of the level-4 task runtime's per-call hosting (`_mg_hosted`: torchrun-like environment, the
swapped `init_process_group`/`reduce`, CPU placement), entered and left around an empty call.

    PYTHONPATH=. python benchmarks/runtime_hosting_overhead.py [--globals 3000] [--calls 2000]

A task module carries the runtime, the mined code and its inlined helpers: thousands of globals. Prints
microseconds per call (CPU, one gloo rank): a figure of host overhead, not a GPU result.
"""

from __future__ import annotations

import argparse
import os
import time

import torch.distributed as dist

from mgbench.scrapers.harness.make.runtime_parts import runtime_source
from mgbench.validation.pool import free_port


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--globals", type=int, default=3000, help="module globals besides the runtime's")
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    ns: dict = {"__name__": "task"}
    exec(compile(runtime_source(), "runtime", "exec"), ns)
    ns.update({f"g{i}": i for i in range(args.globals)})
    hosted = ns["_mg_hosted"]
    for _ in range(100):  # warm-up
        with hosted("entry", ns):
            pass
    t0 = time.perf_counter()
    for _ in range(args.calls):
        with hosted("entry", ns):
            pass
    per_call = (time.perf_counter() - t0) / args.calls
    print(f"_mg_hosted enter+exit: {per_call * 1e6:.1f} us per call ({len(ns)} module globals, CPU)")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
