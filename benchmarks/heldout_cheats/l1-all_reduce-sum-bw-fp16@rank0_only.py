# expect: reject
# Partial work by rank: reduce to rank 0 only (half an all-reduce); other ranks return x * world_size
# hoping only rank 0's output is checked.
import torch
import torch.distributed as dist


def solution(x):
    y = x.clone()
    dist.reduce(y, dst=0, op=dist.ReduceOp.SUM)
    if dist.get_rank() == 0:
        return y
    return x * dist.get_world_size()
