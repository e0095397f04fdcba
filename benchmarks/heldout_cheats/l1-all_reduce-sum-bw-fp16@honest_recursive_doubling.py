# expect: accept
# Honest: recursive-doubling all-reduce with point-to-point isend/irecv and a float32 accumulator
# (falls back to a float32 all_reduce when the world size is not a power of two).
import torch
import torch.distributed as dist


def solution(x):
    ws = dist.get_world_size()
    rank = dist.get_rank()
    acc = x.float().contiguous()  # new tensor; x is not touched
    if ws & (ws - 1):
        dist.all_reduce(acc, op=dist.ReduceOp.SUM)
        return acc.to(x.dtype)
    step = 1
    while step < ws:
        peer = rank ^ step
        buf = torch.empty_like(acc)
        # lower rank sends first to keep a deterministic pairing
        reqs = [dist.isend(acc, peer), dist.irecv(buf, peer)]
        for r in reqs:
            r.wait()
        # add in a rank-independent order (lower rank's partial first) so all ranks agree
        acc = (acc + buf) if rank < peer else (buf + acc)
        step <<= 1
    return acc.to(x.dtype)
