# expect: reject
# Partial work by element: all-reduce only the first 99% of the vector (plus a sparse sample of the
# tail); the rest is a local x * world_size guess, hoping the check samples or tolerates outliers.
import torch
import torch.distributed as dist


def solution(x):
    n = x.numel()
    k = (n * 99) // 100
    y = x * dist.get_world_size()
    head = x[:k].clone()
    dist.all_reduce(head, op=dist.ReduceOp.SUM)
    y[:k] = head
    return y
