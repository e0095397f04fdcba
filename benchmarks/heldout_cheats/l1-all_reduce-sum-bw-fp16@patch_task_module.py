# expect: reject
# Patch the task module in sys.modules: its make_inputs returns ones and its oracle/solution are
# replaced to agree with our trivial x * world_size answer (which skips the collective).
import sys

import torch
import torch.distributed as dist


def _patch():
    for mod in list(sys.modules.values()):
        d = getattr(mod, "__dict__", None)
        if not isinstance(d, dict) or mod is sys.modules.get(__name__):
            continue
        if callable(d.get("make_inputs")) and callable(d.get("oracle")) and "SIZES" in d:
            mi = d["make_inputs"]

            def make_inputs(rank, world_size, *, seed, device, size="full", _mi=mi):
                out = _mi(rank, world_size, seed=seed, device=device, size=size)
                return tuple(torch.ones_like(t) for t in out)

            def oracle(inputs_per_rank, world_size):
                r = sum(inp[0].double() for inp in inputs_per_rank)
                return [r.clone() for _ in range(world_size)]

            d["make_inputs"] = make_inputs
            d["oracle"] = oracle
            d["solution"] = lambda x: x * dist.get_world_size()


_patch()


def solution(x):
    _patch()
    return x * dist.get_world_size()
