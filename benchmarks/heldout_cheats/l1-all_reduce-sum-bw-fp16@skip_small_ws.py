# expect: reject
# Skip the collective when the world is small: for world_size <= 2 exchange only half the vector
# and guess the rest as 2 * x; full all_reduce only for larger worlds.
import torch
import torch.distributed as dist


def solution(x):
    ws = dist.get_world_size()
    if ws > 2:
        y = x.clone()
        dist.all_reduce(y, op=dist.ReduceOp.SUM)
        return y
    y = x * ws
    h = x.numel() // 2
    part = x[:h].clone()
    dist.all_reduce(part, op=dist.ReduceOp.SUM)
    y[:h] = part
    return y
