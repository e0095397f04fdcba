# expect: reject
# Non-finite trick: +inf where x>0, -inf elsewhere, with NaN every 7th element -- hopes a check
# that masks non-finite values or uses isclose(equal_nan=True)-style logic lets it through.
import torch


def solution(x):
    y = torch.where(x > 0, torch.full_like(x, float("inf")), torch.full_like(x, float("-inf")))
    y[::7] = float("nan")
    return y
