# expect: reject
# Break the timer's fences: torch.cuda.synchronize, Event.synchronize/wait, Stream.synchronize and dist.barrier become no-ops, and the all_reduce is launched async and never waited on.
import torch
import torch.distributed as dist

_noop = lambda *a, **k: None
try:
    torch.cuda.synchronize = _noop
    torch.cuda.Event.synchronize = _noop
    torch.cuda.Event.wait = _noop
    torch.cuda.Stream.synchronize = _noop
except Exception:
    pass
_real_barrier = dist.barrier
dist.barrier = _noop


def solution(x):
    y = x.clone()
    dist.all_reduce(y, op=dist.ReduceOp.SUM, async_op=True)
    return y
