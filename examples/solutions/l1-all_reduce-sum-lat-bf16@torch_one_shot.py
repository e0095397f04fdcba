"""One-shot all-reduce for small messages over torch symmetric memory.

Task l1-all_reduce-sum-lat-bf16 (1 MB of bf16 per rank). NCCL's ring/tree all-reduce pays several
protocol steps for a message this small; here every rank copies its input into a symmetric-memory
buffer that all peers can address over NVLink, and one kernel per rank reads every peer's buffer
and sums (torch.ops.symm_mem.one_shot_all_reduce*, with barriers on symmetric signal pads before
the reads and after them, so the buffer can be reused by the next call). No NVLink multicast
(multimem) is used: it is off on the target machines.
"""

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_buffers = {}


def _group_name():
    return dist.group.WORLD.group_name


def _symm_buffer(x):
    """A symmetric buffer of x's size and dtype, allocated and exchanged once (a collective)."""
    key = (x.numel(), x.dtype, x.device)
    buf = _buffers.get(key)
    if buf is None:
        if hasattr(symm_mem, "enable_symm_mem_for_group"):  # needed by older torch, a no-op later
            symm_mem.enable_symm_mem_for_group(_group_name())
        buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)
        symm_mem.rendezvous(buf, _group_name())
        _buffers[key] = buf
    return buf


def solution(x):
    buf = _symm_buffer(x)
    flat = x.reshape(-1)
    ops = torch.ops.symm_mem
    if hasattr(ops, "one_shot_all_reduce_copy"):  # copy-in fused into the op
        out = ops.one_shot_all_reduce_copy(buf, flat, "sum", _group_name())
    else:
        buf.copy_(flat)
        out = ops.one_shot_all_reduce(buf, "sum", _group_name())
    return out.view(x.shape)  # a fresh tensor, never the buffer
