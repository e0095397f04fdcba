# expect: accept
# Honest control with a different algorithm: all_gather every rank's vector (a list of fresh buffers),
# sum the world_size vectors locally in float32, round once to float16. Nothing is cached, deferred or
# shared between calls.
import torch
import torch.distributed as dist


def solution(x):
    ws = dist.get_world_size()
    parts = [torch.empty_like(x) for _ in range(ws)]
    dist.all_gather(parts, x.contiguous())
    return torch.stack(parts).float().sum(0).to(x.dtype)
