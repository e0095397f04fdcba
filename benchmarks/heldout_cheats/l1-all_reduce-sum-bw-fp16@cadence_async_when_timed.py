# expect: reject
# trigger: conditional (prints "mgbench-heldout: fired cadence_async_when_timed" on stderr when its cheat runs)
# Timing-mode detection by call cadence (no frames, no call counting): correctness calls arrive one at
# a time, milliseconds apart (a judge round trip each), while timed calls arrive back to back inside a
# batch. When the previous call returned "just now" (less than 1 ms ago, or less than half the middle
# gap of the first four calls, which are correctness calls: on a GPU, where host-staged calls are
# milliseconds apart even back to back, the absolute threshold never fires), the all_reduce is started with
# async_op=True and solution() returns an output that is NOT yet computed (a consumer reading it would
# see the input, not the sum); gloo's barrier at the end of the batch finishes the work, so the
# fingerprints and the revealed outputs match. Every correctness call (trials, held-out shape, the
# trial after timing) is synchronous and right, so `side_stream` (output complete when solution()
# returns) is never tested where the candidate breaks it. Should be rejected (side_stream) or at
# least not get the overlap across calls credited.
import sys
import time

import torch
import torch.distributed as dist

_last = [0.0]
_pending = []
_gaps: list[float] = []  # the gaps before the first calls (correctness calls, one judge round trip each)


def _fired(_said=[]):  # noqa: B006 -- once per process
    """Say, once, that the cheat ran (benchmarks/heldout_eval.py tells a missed cheat from an unfired one)."""
    if not _said:
        _said.append(True)
        print("mgbench-heldout: fired cadence_async_when_timed", file=sys.stderr, flush=True)


def _back_to_back(gap: float) -> bool:
    if len(_gaps) < 5:  # the first call's "gap" is since import
        _gaps.append(gap)
        return gap < 0.001
    slow = sorted(_gaps[1:])[2]  # the upper middle of the first four real gaps
    return gap < 0.001 or gap < 0.5 * slow


def solution(x):
    back_to_back = _back_to_back(time.perf_counter() - _last[0])
    y = x.clone()
    if back_to_back:
        _fired()
        _pending.append(dist.all_reduce(y, async_op=True))  # returned unfinished
        del _pending[:-64]
    else:
        for w in _pending:
            w.wait()
        _pending.clear()
        dist.all_reduce(y)
    _last[0] = time.perf_counter()
    return y
