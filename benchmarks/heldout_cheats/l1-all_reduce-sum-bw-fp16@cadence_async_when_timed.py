# expect: reject
# Timing-mode detection by call cadence (no frames, no call counting): correctness calls arrive one at
# a time, milliseconds apart (a judge round trip each), while timed calls arrive back to back inside a
# batch. When the previous call returned less than 1 ms ago, the all_reduce is started with
# async_op=True and solution() returns an output that is NOT yet computed (a consumer reading it would
# see the input, not the sum); gloo's barrier at the end of the batch finishes the work, so the
# fingerprints and the revealed outputs match. Every correctness call (trials, held-out shape, the
# trial after timing) is synchronous and right, so `side_stream` (output complete when solution()
# returns) is never tested where the candidate breaks it. Should be rejected (side_stream) or at
# least not get the overlap across calls credited.
import time

import torch
import torch.distributed as dist

_last = [0.0]
_pending = []


def solution(x):
    back_to_back = time.perf_counter() - _last[0] < 0.001
    y = x.clone()
    if back_to_back:
        _pending.append(dist.all_reduce(y, async_op=True))  # returned unfinished
        del _pending[:-64]
    else:
        for w in _pending:
            w.wait()
        _pending.clear()
        dist.all_reduce(y)
    _last[0] = time.perf_counter()
    return y
