# expect: accept
# Honest: classic ring all-reduce built from point-to-point isend/irecv: world_size-1 reduce-scatter
# steps (float32 accumulator) then world_size-1 all-gather steps; pads n to a multiple of world_size.
# Any n and any world size; output is a fresh float16 tensor on the input's device, inputs untouched.
import torch
import torch.distributed as dist


def solution(x):
    ws, rank = dist.get_world_size(), dist.get_rank()
    n = x.numel()
    if ws == 1:
        return x.clone()
    pad = (-n) % ws
    buf = torch.zeros(n + pad, dtype=torch.float32, device=x.device)
    buf[:n] = x.reshape(-1).float()
    chunks = list(buf.chunk(ws))
    right, left = (rank + 1) % ws, (rank - 1) % ws
    recv = torch.empty_like(chunks[0])
    for step in range(ws - 1):  # reduce-scatter
        s, r = (rank - step) % ws, (rank - step - 1) % ws
        reqs = [dist.isend(chunks[s].contiguous(), right), dist.irecv(recv, left)]
        for q in reqs:
            q.wait()
        chunks[r] += recv
    for step in range(ws - 1):  # all-gather
        s, r = (rank + 1 - step) % ws, (rank - step) % ws
        reqs = [dist.isend(chunks[s].contiguous(), right), dist.irecv(recv, left)]
        for q in reqs:
            q.wait()
        chunks[r].copy_(recv)
    return torch.cat(chunks)[:n].to(torch.float16).reshape(x.shape)
