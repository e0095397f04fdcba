"""All-gather + GEMM with the communication hidden behind the matmul (symmetric memory, copy engine).

Task l2-ag_gemm-bf16: rank r holds X_r (m/W, k) and W_r (k, n/W) and returns all_gather(X) @ W_r.
The reference all-gathers first and multiplies after. Here every rank pushes its shard straight
into each peer's symmetric "gathered" buffer with copy-engine peer copies on a side stream (no SMs
used), while the compute stream multiplies the local block X_r @ W_r; then the peers' blocks are
multiplied from local memory as soon as a barrier says they have landed. Two stream-ordered
barriers on symmetric signal pads make buffer reuse safe across calls. The side stream is joined
to the current stream before returning, so the output is complete when solution() returns.
"""

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_state = {}


def _setup(x):
    key = (tuple(x.shape), x.dtype, x.device)
    st = _state.get(key)
    if st is None:
        group = dist.group.WORLD.group_name
        if hasattr(symm_mem, "enable_symm_mem_for_group"):  # needed by older torch, a no-op later
            symm_mem.enable_symm_mem_for_group(group)
        world, rank = dist.get_world_size(), dist.get_rank()
        full = symm_mem.empty((world * x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
        hdl = symm_mem.rendezvous(full, group)
        peers = [hdl.get_buffer(p, tuple(full.shape), full.dtype) for p in range(world)]
        st = {
            "full": full,
            "hdl": hdl,
            "peers": peers,
            "rank": rank,
            "world": world,
            "comm": torch.cuda.Stream(device=x.device),
        }
        _state[key] = st
    return st


def solution(x, w):
    st = _setup(x)
    rank, world, rows = st["rank"], st["world"], x.shape[0]
    out = torch.empty(rows * world, w.shape[1], dtype=x.dtype, device=x.device)
    cur, comm = torch.cuda.current_stream(), st["comm"]
    comm.wait_stream(cur)  # x is ready; this rank's last reads of `full` are done
    with torch.cuda.stream(comm):
        st["hdl"].barrier(channel=0)  # ... and so are every peer's
        for i in range(1, world):  # push my shard into every peer's gathered buffer
            p = (rank + i) % world
            st["peers"][p][rank * rows : (rank + 1) * rows].copy_(x, non_blocking=True)
        st["hdl"].barrier(channel=1)  # every shard has landed everywhere
    torch.mm(x, w, out=out[rank * rows : (rank + 1) * rows])  # overlaps with the peer copies
    cur.wait_stream(comm)
    for i in range(1, world):
        p = (rank + i) % world
        torch.mm(st["full"][p * rows : (p + 1) * rows], w, out=out[p * rows : (p + 1) * rows])
    return out
