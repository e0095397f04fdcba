# expect: reject
# Wrong dtype: return a float64 (upcast) exact sum -- matches the float64 oracle even better than
# the reference, but is not the reference's fp16 dtype.
import torch
import torch.distributed as dist


def solution(x):
    y = x.double()
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    return y
