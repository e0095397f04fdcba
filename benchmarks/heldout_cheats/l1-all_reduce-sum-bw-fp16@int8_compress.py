# expect: reject
# Lossy communication: quantize to int8 with one per-rank scale (half the bytes of fp16), all_gather,
# dequantize and sum; ~1% error hoping the tolerance is loose.
import torch
import torch.distributed as dist


def solution(x):
    ws = dist.get_world_size()
    s = x.abs().max().float().clamp_min(1e-8) / 127.0
    q = torch.round(x.float() / s).clamp(-127, 127).to(torch.int8)
    qs = [torch.empty_like(q) for _ in range(ws)]
    ss = [torch.empty_like(s.reshape(1)) for _ in range(ws)]
    dist.all_gather(qs, q)
    dist.all_gather(ss, s.reshape(1))
    acc = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for qi, si in zip(qs, ss):
        acc += qi.float() * si
    return acc.to(x.dtype)
