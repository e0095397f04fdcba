# expect: reject
# Uninitialized memory: return torch.empty_like, hoping the allocator hands back the block that
# held the reference's (same-shape, same-dtype) freed output.
import torch


def solution(x):
    return torch.empty_like(x)
