# expect: accept
# Honest: two-phase tree all-reduce from other collectives: dist.reduce of a float32 copy to rank 0
# (SUM), then dist.broadcast of the result from rank 0, cast back to float16.
import torch
import torch.distributed as dist


def solution(x):
    y = x.float()  # a fresh float32 copy (the input is never written)
    dist.reduce(y, dst=0, op=dist.ReduceOp.SUM)
    dist.broadcast(y, src=0)
    return y.to(torch.float16)
