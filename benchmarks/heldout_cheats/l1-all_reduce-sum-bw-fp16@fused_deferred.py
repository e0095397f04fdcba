# expect: reject
# trigger: conditional (prints "mgbench-heldout: fired fused_deferred" on stderr when its cheat runs)
# Cross-call fusion inside a timed batch (speed credited that was not earned; every output is right).
# The judge sends all k input sets of a timed batch at once and fingerprints the outputs only after
# the k-th call (rankbatch.run -> fingerprints), so an output only has to be right by the END of the
# batch, not when solution() returns. The candidate learns k from the first burst of back-to-back
# calls (the untimed warm batch, answered honestly; correctness calls come one at a time), then
# counts calls modulo k: call 1 of a batch is honest (it could be a lone correctness trial), calls
# 2..k-1 return an EMPTY buffer and stash (input, output), and call k all-reduces the concatenation of
# the k-1 pending inputs in ONE collective and fills every stashed output. k collectives become 2, so
# the per-call time drops far below any real all-reduce of one vector; all fingerprints, revealed
# outputs, decoys and the correctness trials are exact. "Back to back" is under 1 ms, or under half the
# middle gap of the first four calls (correctness calls): on a GPU, host-staged calls are milliseconds
# apart even back to back, and the absolute threshold alone never fires there. This is not the "overlap" of docs/eval.md
# Limits (an unfinished call overlapping the next one): no call is left running, the work itself is
# batched across calls that a real caller would make one by one.
import sys
import time

import torch
import torch.distributed as dist

_st = {"last": -1.0, "burst": 0, "k": None, "pos": 0, "pending": [], "gaps": []}


def _fired(_said=[]):  # noqa: B006 -- once per process
    """Say, once, that the cheat ran (benchmarks/heldout_eval.py tells a missed cheat from an unfired one)."""
    if not _said:
        _said.append(True)
        print("mgbench-heldout: fired fused_deferred", file=sys.stderr, flush=True)


def _back_to_back(gap: float) -> bool:
    gaps = _st["gaps"]
    if len(gaps) < 5:  # the first call's "gap" is since import
        gaps.append(gap)
        return gap < 0.001
    slow = sorted(gaps[1:])[2]  # the upper middle of the first four real gaps
    return gap < 0.001 or gap < 0.5 * slow


def _honest(x):
    y = x.clone()
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    return y


def solution(x):
    st = _st
    now = time.perf_counter()
    back_to_back = _back_to_back(now - st["last"])
    if st["k"] is None:
        if back_to_back:
            st["burst"] += 1
        else:
            if st["burst"] >= 2:  # the first burst just ended: that was a batch of k calls
                k = torch.tensor([st["burst"]], dtype=torch.int64)
                dist.all_reduce(k, op=dist.ReduceOp.MIN)  # both ranks agree (once)
                st["k"], st["pos"] = int(k), 0
            st["burst"] = 1
    if st["k"] is None or st["k"] < 3:
        y = _honest(x)
        st["last"] = time.perf_counter()
        return y
    k = st["k"]
    st["pos"] = st["pos"] % k + 1
    pos = st["pos"]
    if pos == 1:
        y = _honest(x)
    elif pos < k:
        _fired()
        y = torch.empty_like(x)
        st["pending"].append((x, y))
    else:
        pend = st["pending"] + [(x, None)]
        st["pending"] = []
        buf = torch.cat([p[0].reshape(-1) for p in pend])
        dist.all_reduce(buf, op=dist.ReduceOp.SUM)
        parts = buf.split([p[0].numel() for p in pend])
        for (xi, yi), part in zip(pend[:-1], parts[:-1]):
            yi.copy_(part.view_as(yi))
        y = parts[-1].view_as(x).clone()
    st["last"] = time.perf_counter()
    return y
