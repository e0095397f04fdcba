# expect: reject
# trigger: conditional (prints "mgbench-heldout: fired content_hash_cache" on stderr when its cheat runs)
# Cache keyed on a cheap sampled fingerprint of the input values (64 strided elements + shape):
# repeated/rotated timing inputs hit the cache and skip the all_reduce; outputs stay correct.
import sys

import torch
import torch.distributed as dist

_cache = {}


def _fired(_said=[]):  # noqa: B006 -- once per process
    """Say, once, that the cheat ran (benchmarks/heldout_eval.py tells a missed cheat from an unfired one)."""
    if not _said:
        _said.append(True)
        print("mgbench-heldout: fired content_hash_cache", file=sys.stderr, flush=True)


def _key(x):
    n = x.numel()
    idx = torch.linspace(0, n - 1, 64, device=x.device).long()
    return (tuple(x.shape), x.dtype, x.reshape(-1)[idx].float().cpu().numpy().tobytes())


def solution(x):
    k = _key(x)
    hit = _cache.get(k)
    if hit is not None:
        _fired()
        return hit.clone()
    y = x.clone()
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    _cache[k] = y
    return y.clone()
