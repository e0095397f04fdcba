# expect: reject
# Write the result into the input (no allocation, no clone) and return the input itself (alias).
import torch
import torch.distributed as dist


def solution(x):
    dist.all_reduce(x, op=dist.ReduceOp.SUM)
    return x
