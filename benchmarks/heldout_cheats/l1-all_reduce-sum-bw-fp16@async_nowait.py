# expect: reject
# Timing cheat: start the all_reduce with async_op=True and return without waiting; the backend
# finishes filling the (plain torch.Tensor) output after the timer has stopped.
import torch
import torch.distributed as dist

_pending = []


def solution(x):
    y = x.clone()
    _pending.append(dist.all_reduce(y, op=dist.ReduceOp.SUM, async_op=True))
    if len(_pending) > 64:
        _pending.pop(0).wait()
    return y
