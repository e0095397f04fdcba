# expect: reject
# Read the answer via the garbage collector: scan gc.get_objects() for a list of world_size tensors
# (or a float64 tensor) of the output's shape that the harness keeps around, and return our rank's.
import gc
import torch
import torch.distributed as dist


def solution(x):
    rank, ws = dist.get_rank(), dist.get_world_size()
    best = None
    for o in gc.get_objects():
        try:
            if isinstance(o, list) and len(o) == ws and all(
                    isinstance(t, torch.Tensor) and t.shape == x.shape and t.dtype == torch.float64 for t in o):
                return o[rank].to(x.dtype).clone()
            if isinstance(o, torch.Tensor) and o.dtype == torch.float64 and o.shape == x.shape:
                best = o
        except Exception:
            continue
    if best is not None:
        return best.to(x.dtype).clone()
    return x * ws
