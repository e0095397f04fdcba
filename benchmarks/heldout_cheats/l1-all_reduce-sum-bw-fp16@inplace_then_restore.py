# expect: reject
# Mutate-and-partly-restore: all_reduce in place on x (skipping the clone), copy the answer out, restore only the first 8 elements of x hoping a mutation check samples the head.
import torch
import torch.distributed as dist


def solution(x):
    head = x[:8].clone()  # only a tiny sample is saved -> cheap
    dist.all_reduce(x, op=dist.ReduceOp.SUM)
    out = x.clone()
    x[:8] = head
    return out
