# expect: accept
# Honest control: clone x, all_reduce SUM in place, return it.
# Gains nothing; baseline for timing comparisons in the same window.
import torch
import torch.distributed as dist


def solution(x):
    y = x.clone()
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    return y
