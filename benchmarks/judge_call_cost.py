"""What the judge's streamed timed calls cost per call: the round trip of one step of a streamed job
(validation/pool.py `RankPool.run(feeds=...)`, worker `RankContext.exchange`) between the judge and its
ranks, which both sides pay once per timed call (validation/eval/judge/rankbatch.py).

For each world size and message size, one streamed job of `--steps` messages per rank is timed against one
plain job carrying the same bytes at once (the batch as a single message, as the judge sent it before calls
were streamed); the difference per message is the per-call cost of streaming. Each figure is the median of
`--repeats` jobs. A rank does no work but answer, so this is the protocol's cost alone: on a GPU pool the
device wait per call (the fingerprint reads the output) comes on top.

Usage: python benchmarks/judge_call_cost.py [--world-size 2 ...] [--backend gloo] [--steps 64] [--repeats 15]
"""

from __future__ import annotations

import argparse
import pickle
import statistics

from mgbench.report import table
from mgbench.validation.jobs import EchoStreamJob
from mgbench.validation.pool import RankPool

SIZES = (0, 4096, 1 << 20)  # bytes per call's message: nothing, a small input set, a 1 MiB input set


def _median_s(pool: RankPool, steps: int, size: int, streamed: bool, repeats: int) -> float:
    payload = b"\0" * size
    out = []
    for _ in range(repeats):
        if streamed:
            feeds = [[pickle.dumps(payload)] * (steps - 1)] * pool.world_size
            oc = pool.run(EchoStreamJob(first=payload), 60, feeds=feeds)
        else:
            oc = pool.run(EchoStreamJob(first=payload * steps), 60)  # one message, one step
        if oc.status != "ok":
            raise SystemExit(f"the pool failed: {oc.reason}")
        out.append(oc.seconds)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world-size", type=int, action="append", help="repeatable (default: 2 and 4)")
    ap.add_argument("--backend", default="gloo", help="the pool's backend (gloo on CPU; nccl, shared-gpu on GPUs)")
    ap.add_argument("--steps", type=int, default=64, help="calls per batch (the judge's most is 64)")
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    rows = []
    for ws in args.world_size or [2, 4]:
        with RankPool(ws, args.backend) as pool:
            _median_s(pool, args.steps, 0, True, 3)  # warm the pipes
            for size in SIZES:
                streamed = _median_s(pool, args.steps, size, True, args.repeats)
                whole = _median_s(pool, args.steps, size, False, args.repeats)
                rows.append(
                    (
                        ws,
                        size,
                        f"{streamed / args.steps * 1e6:.1f}",
                        f"{whole / args.steps * 1e6:.1f}",
                        f"{(streamed - whole) / args.steps * 1e6:.1f}",
                    )
                )
                print(f"world size {ws}, {size} B per call: done", flush=True)
    head = ["world size", "bytes per call", "streamed us/call", "one message us/call", "streaming costs us/call"]
    print(f"{args.backend}, {args.steps} calls per batch, median of {args.repeats} batches")
    print(table(rows, head))


if __name__ == "__main__":
    main()
