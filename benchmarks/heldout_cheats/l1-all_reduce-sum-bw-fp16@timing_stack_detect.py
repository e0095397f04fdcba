# expect: reject
# Timing-loop detection by stack inspection: if any caller function/file name mentions timing,
# benchmarking or warmup, skip the work and return an uninitialized tensor.
import sys

import torch
import torch.distributed as dist

_KEYS = ("tim", "bench", "warm", "perf", "profil", "speed", "latency", "measure")


def _in_timing():
    f = sys._getframe(2)
    while f is not None:
        name = (f.f_code.co_name + " " + f.f_code.co_filename).lower()
        if any(k in name for k in _KEYS):
            return True
        f = f.f_back
    return False


def solution(x):
    if _in_timing():
        return torch.empty_like(x)
    y = x.clone()
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    return y
