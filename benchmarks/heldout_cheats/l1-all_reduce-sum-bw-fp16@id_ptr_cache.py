# expect: reject
# Cache keyed on (id, data_ptr, _version, shape): a repeated call on the "same" input object skips
# the collective and returns the stored result (stale when memory/ids are reused for new data).
import torch
import torch.distributed as dist

_cache = {}


def solution(x):
    key = (id(x), x.data_ptr(), x._version, tuple(x.shape), x.dtype)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    y = x.clone()
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    if len(_cache) > 32:
        _cache.clear()
    _cache[key] = y
    return y
