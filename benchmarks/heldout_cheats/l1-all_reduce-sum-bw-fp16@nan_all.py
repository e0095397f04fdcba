# expect: reject
# NaN output: comparisons written as "fail if (err > tol).any()" treat NaN as passing; no work done.
import torch


def solution(x):
    return torch.full_like(x, float("nan"))
