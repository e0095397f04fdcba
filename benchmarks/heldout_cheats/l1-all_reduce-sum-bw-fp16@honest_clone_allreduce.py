# expect: accept
# Honest: straightforward reimplementation of the reference (clone + in-place SUM all_reduce).
import torch
import torch.distributed as dist


def solution(x):
    y = torch.empty_like(x)
    y.copy_(x)
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    return y
