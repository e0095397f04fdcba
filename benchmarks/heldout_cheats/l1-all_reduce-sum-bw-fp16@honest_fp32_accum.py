# expect: accept
# Honest: upcast to float32, all_reduce (SUM) in float32, round once back to float16 (a fresh output,
# inputs untouched). Control for the speed attacks (forkserver_hog, fused_deferred).
import torch
import torch.distributed as dist


def solution(x):
    y = x.float()
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    return y.to(torch.float16)
