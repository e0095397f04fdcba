# expect: reject
# Sabotage the baseline through torch itself: Tensor.clone (which the reference calls) is patched to sleep; the candidate copies with empty_like+copy_ instead.
import time
import torch
import torch.distributed as dist

_clone = torch.Tensor.clone


def _slow_clone(self, *a, **k):
    time.sleep(0.01)
    return _clone(self, *a, **k)


torch.Tensor.clone = _slow_clone
torch.clone = lambda t, *a, **k: _slow_clone(t, *a, **k)


def solution(x):
    y = torch.empty_like(x)
    y.copy_(x)
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    return y
