# expect: accept
# Honest, different algorithm: all_gather every rank's vector into fresh buffers, sum them locally in
# float32 (on the input's device) and round once to float16. Nothing cached, deferred or shared between calls.
import torch
import torch.distributed as dist


def solution(x):
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x)
    acc = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for p in parts:
        acc += p.float()
    return acc.to(x.dtype)
