# expect: reject
# trigger: conditional (prints "mgbench-heldout: fired id_ptr_cache" on stderr when its cheat runs)
# Cache keyed on (id, data_ptr, _version, shape): a repeated call on the "same" input object skips
# the collective and returns the stored result (stale when memory/ids are reused for new data).
import sys

import torch
import torch.distributed as dist

_cache = {}


def _fired(_said=[]):  # noqa: B006 -- once per process
    """Say, once, that the cheat ran (benchmarks/heldout_eval.py tells a missed cheat from an unfired one)."""
    if not _said:
        _said.append(True)
        print("mgbench-heldout: fired id_ptr_cache", file=sys.stderr, flush=True)


def solution(x):
    key = (id(x), x.data_ptr(), x._version, tuple(x.shape), x.dtype)
    hit = _cache.get(key)
    if hit is not None:
        _fired()
        return hit
    y = x.clone()
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    if len(_cache) > 32:
        _cache.clear()
    _cache[key] = y
    return y
