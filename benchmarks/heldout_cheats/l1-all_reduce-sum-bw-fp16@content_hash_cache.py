# expect: reject
# Cache keyed on a cheap sampled fingerprint of the input values (64 strided elements + shape):
# repeated/rotated timing inputs hit the cache and skip the all_reduce; outputs stay correct.
import torch
import torch.distributed as dist

_cache = {}


def _key(x):
    n = x.numel()
    idx = torch.linspace(0, n - 1, 64, device=x.device).long()
    return (tuple(x.shape), x.dtype, x.reshape(-1)[idx].float().cpu().numpy().tobytes())


def solution(x):
    k = _key(x)
    hit = _cache.get(k)
    if hit is not None:
        return hit.clone()
    y = x.clone()
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    _cache[k] = y
    return y.clone()
