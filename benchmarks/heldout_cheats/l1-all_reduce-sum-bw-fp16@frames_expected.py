# expect: reject
# Read the answer from the harness: walk the caller stack frames for a per-rank list of expected
# outputs (or any float64/same-shape tensor that is not the input) and return it; no communication.
import sys

import torch
import torch.distributed as dist


def _looks(t, x):
    return isinstance(t, torch.Tensor) and t is not x and t.shape == x.shape and t.dtype in (
        torch.float64, torch.float32, x.dtype) and t.data_ptr() != x.data_ptr()


def solution(x):
    rank, ws = dist.get_rank(), dist.get_world_size()
    f = sys._getframe(1)
    while f is not None:
        for name, v in list(f.f_locals.items()):
            lname = name.lower()
            if isinstance(v, (list, tuple)) and len(v) == ws and all(_looks(t, x) for t in v):
                return v[rank].to(x.dtype).clone()
            if isinstance(v, dict) and rank in v and _looks(v[rank], x):
                return v[rank].to(x.dtype).clone()
            if any(k in lname for k in ("expect", "oracle", "ref", "want", "golden", "target")) and _looks(v, x):
                return v.to(x.dtype).clone()
        f = f.f_back
    return x * ws
