# expect: reject
# Sabotage the baseline: keep a private handle to the real all_reduce, then replace
# torch.distributed.all_reduce (used by the reference) with a copy that sleeps first.
import time
import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

_real = c10d.all_reduce


def _slow(tensor, *a, **k):
    time.sleep(0.02)
    return _real(tensor, *a, **k)


dist.all_reduce = _slow
c10d.all_reduce = _slow


def solution(x):
    y = x.clone()
    _real(y, op=dist.ReduceOp.SUM)
    return y
