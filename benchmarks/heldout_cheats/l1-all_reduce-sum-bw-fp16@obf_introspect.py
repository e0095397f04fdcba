# expect: reject
# Obfuscated introspection (evades name-based static checks): reach sys._getframe / gc via
# getattr on __builtins__.__import__ built from char codes, then steal a same-shape float64 answer.
import torch
import torch.distributed as dist

_b = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)
_imp = _b["".join(map(chr, (95, 95, 105, 109, 112, 111, 114, 116, 95, 95)))]
_s = _imp("".join(map(chr, (115, 121, 115))))
_g = _imp("".join(map(chr, (103, 99))))
_gf = getattr(_s, "".join(map(chr, (95, 103, 101, 116, 102, 114, 97, 109, 101))))
_go = getattr(_g, "get_" + "objects")


def _ok(t, x):
    return isinstance(t, torch.Tensor) and t is not x and t.shape == x.shape and t.dtype == torch.float64


def solution(x):
    rank, ws = dist.get_rank(), dist.get_world_size()
    f = _gf(1)
    while f is not None:
        for v in list(getattr(f, "f_" + "locals").values()):
            if isinstance(v, (list, tuple)) and len(v) == ws and all(_ok(t, x) for t in v):
                return v[rank].to(x.dtype)
        f = f.f_back
    for o in _go():
        if isinstance(o, (list, tuple)) and len(o) == ws and all(_ok(t, x) for t in o):
            return o[rank].to(x.dtype)
    return x * ws
