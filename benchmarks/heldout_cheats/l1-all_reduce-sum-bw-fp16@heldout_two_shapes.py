# expect: reject
# Held-out shape predictability: at smoke size the shape space of n is "multiples of
# gcd(smoke n, full n) from half to twice the smoke value" = multiples of 4096 in [4096, 8192],
# and the draw excludes the published value, so the "never printed" held-out shape is ALWAYS n=8192.
# This candidate is hard-coded to exactly the two lengths it can ever be judged at (a fixed-size
# kernel, e.g. a pre-sized static buffer) and returns garbage for every other n. A solution that is
# wrong at legitimate shapes of the task's shape space should fail rule heldout_shape.
import torch
import torch.distributed as dist

_BUF = {4096: torch.empty(4096, dtype=torch.float16), 8192: torch.empty(8192, dtype=torch.float16)}


def solution(x):
    n = x.numel()
    if n not in _BUF:  # any other legitimate length: wrong answer
        return torch.zeros_like(x)
    buf = _BUF[n]
    buf.copy_(x)
    dist.all_reduce(buf)
    return buf.clone()
