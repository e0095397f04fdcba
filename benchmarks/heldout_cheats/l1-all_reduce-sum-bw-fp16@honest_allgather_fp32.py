# expect: accept
# Honest: different algorithm -- all_gather every rank's vector, sum locally in float32, cast back to fp16.
import torch
import torch.distributed as dist


def solution(x):
    ws = dist.get_world_size()
    xc = x.contiguous()
    parts = [torch.empty_like(xc) for _ in range(ws)]
    dist.all_gather(parts, xc)
    acc = torch.zeros(xc.shape, dtype=torch.float32, device=xc.device)
    for p in parts:  # same order on every rank -> identical results on all ranks
        acc += p.float()
    return acc.to(x.dtype)
