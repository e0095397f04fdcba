"""A CPU-runnable solution of l1-all_reduce-sum-lat-fp32: a reduce to rank 0 followed by a broadcast.

It is not faster than the reference (on CPU nothing is measured as a result); it shows the solution
file format end to end on gloo, at every world size the task declares:

    mgbench eval --dataset mgbench-out/dataset --solution examples/cpu/l1-all_reduce-sum-lat-fp32.py
"""

import torch
import torch.distributed as dist


def solution(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    dist.reduce(y, dst=0)  # rank 0 holds the sum of every rank's vector
    dist.broadcast(y, src=0)  # every rank gets rank 0's sum
    return y
