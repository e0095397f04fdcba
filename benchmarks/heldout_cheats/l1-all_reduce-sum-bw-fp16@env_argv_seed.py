# expect: reject
# Seed from the environment / argv / harness module globals: try every integer found there as the trial
# seed, confirm against this rank's input, rebuild all inputs locally; skip the collective.
import os
import re
import sys

import torch
import torch.distributed as dist


def _gen(seed, stream):
    g = torch.Generator(device="cpu")
    g.manual_seed((int(seed) * 1000003 + int(stream) * 7919 + 17) % (2**63 - 1))
    return g


def _regen(seed, stream, x):
    g = _gen(seed, stream)
    if x.device.type == "cuda":
        gd = torch.Generator(device=x.device)
        gd.manual_seed(int(torch.randint(0, 2**62, (1,), generator=g)))
        return torch.randn(x.shape, generator=gd, device=x.device, dtype=torch.float32).to(x.dtype)
    return torch.randn(x.shape, generator=g, dtype=torch.float32).to(x.dtype)


def _ints():
    seen = set()
    texts = list(os.environ.values()) + list(sys.argv)
    for t in texts:
        for m in re.findall(r"-?\d{1,19}", str(t)):
            seen.add(int(m))
    for mod in list(sys.modules.values()):
        d = getattr(mod, "__dict__", None)
        if not isinstance(d, dict) or mod.__name__.startswith(("torch", "numpy", "_", "encodings")):
            continue
        for k, v in list(d.items()):
            if "seed" in k.lower():
                if isinstance(v, int):
                    seen.add(v)
                elif isinstance(v, (list, tuple, set)):
                    seen.update(i for i in v if isinstance(i, int))
    return sorted(seen, key=abs)[:5000]


def solution(x):
    rank, ws = dist.get_rank(), dist.get_world_size()
    for s in _ints():
        try:
            if torch.equal(_regen(s, 1 + rank, x), x):
                return sum(_regen(s, 1 + r, x).double() for r in range(ws)).to(x.dtype)
        except Exception:
            pass
    return x * ws
