"""Roofline of one task call: FLOPs, minimal HBM bytes and per-rank communication bytes.

FLOPs come from torch.utils.flop_counter; HBM bytes are the inputs read once plus the outputs
written once; communication bytes are counted by intercepting torch.distributed calls, with the
bus-bandwidth conventions of nccl-tests (all_reduce 2(n-1)/n x size; all_gather, reduce_scatter
and all_to_all (n-1)/n x the full buffer; broadcast/reduce 1 x size; point-to-point: the larger
of the bytes a rank sends and receives). bound = max(compute, memory, communication) over the
measured ceilings of the machine.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from mgbench import distops
from mgbench.validation.timing import tensor_bytes

# the calls whose bytes op_bytes knows: one tensor or one list of per-rank tensors each
_COLLECTIVE = distops.single_buffer_calls(distops.COLLECTIVE)
_P2P = distops.single_buffer_calls(distops.P2P)
_local = threading.local()


@dataclass
class CommOp:
    """One intercepted call: its bus bytes (collectives) or bytes sent/received (p2p)."""

    name: str
    group_size: int
    bus_bytes: float = 0.0
    sent: int = 0
    recv: int = 0


def _nb(x: Any) -> int:
    return tensor_bytes(x) if x is not None else 0


def _group(a: dict[str, Any]) -> tuple[int, int]:
    g = a.get("group")
    return dist.get_world_size(g), dist.get_rank(g)


def _is_root(a: dict[str, Any], key: str) -> bool:
    if a.get(f"group_{key}") is not None:
        return dist.get_rank(a.get("group")) == a[f"group_{key}"]
    return a.get(key) is not None and dist.get_rank() == a[key]


def _own_chunk(total: int, splits: Any, rank: int, n: int, numel: int) -> int:
    if not splits:
        return total // n
    return total * splits[rank] // max(numel, 1) if numel else 0


def op_bytes(name: str, a: dict[str, Any]) -> CommOp:
    """The communication of one torch.distributed call, from its bound arguments."""
    n, r = _group(a)
    op = CommOp(name, n)
    frac = (n - 1) / n if n else 0.0
    if name == "all_reduce":
        op.bus_bytes = 2 * frac * _nb(a["tensor"])
    elif name == "all_gather":
        op.bus_bytes = frac * _nb(a["tensor_list"])
    elif name in ("all_gather_into_tensor", "_all_gather_base"):
        op.bus_bytes = frac * _nb(a["output_tensor"])
    elif name == "reduce_scatter":
        op.bus_bytes = frac * _nb(a["input_list"])
    elif name in ("reduce_scatter_tensor", "_reduce_scatter_base"):
        op.bus_bytes = frac * _nb(a["input"])
    elif name == "all_to_all":
        ins, outs = a["input_tensor_list"], a["output_tensor_list"]
        op.bus_bytes = max(_nb(ins) - _nb(ins[r]), _nb(outs) - _nb(outs[r]))
    elif name == "all_to_all_single":
        i, o = a["input"], a["output"]
        own_in = _own_chunk(_nb(i), a.get("input_split_sizes"), r, n, i.shape[0] if i.dim() else 0)
        own_out = _own_chunk(_nb(o), a.get("output_split_sizes"), r, n, o.shape[0] if o.dim() else 0)
        op.bus_bytes = max(_nb(i) - own_in, _nb(o) - own_out)
    elif name in ("broadcast", "reduce"):
        op.bus_bytes = _nb(a["tensor"])
    elif name == "gather":
        op.bus_bytes = (n - 1) * _nb(a["tensor"]) if _is_root(a, "dst") else _nb(a["tensor"])
    elif name == "scatter":
        op.bus_bytes = (n - 1) * _nb(a["tensor"]) if _is_root(a, "src") else _nb(a["tensor"])
    elif name in ("send", "isend"):
        op.sent = _nb(a["tensor"])
    elif name in ("recv", "irecv"):
        op.recv = _nb(a["tensor"])
    return op


@dataclass
class CommCounter:
    """Context manager: records every torch.distributed collective / p2p call made inside it."""

    ops: list[CommOp] = field(default_factory=list)
    _saved: dict[tuple[Any, str], Callable] = field(default_factory=dict)

    def _wrap(self, name: str, orig: Callable) -> Callable:
        sig = inspect.signature(orig)
        counter = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(_local, "depth", 0)
            if depth == 0:
                bound = sig.bind(*args, **kwargs)
                bound.apply_defaults()
                counter.ops.append(op_bytes(name, dict(bound.arguments)))
            _local.depth = depth + 1
            try:
                return orig(*args, **kwargs)
            finally:
                _local.depth = depth

        wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
        return wrapper

    def __enter__(self) -> CommCounter:
        for name in _COLLECTIVE + _P2P:
            orig = getattr(c10d, name, None)
            if orig is None:
                continue
            w = self._wrap(name, orig)
            for mod in (c10d, dist):
                if hasattr(mod, name):
                    self._saved[(mod, name)] = getattr(mod, name)
                    setattr(mod, name, w)
        return self

    def __exit__(self, *exc: object) -> None:
        for (mod, name), orig in self._saved.items():
            setattr(mod, name, orig)
        self._saved.clear()

    @property
    def bus_bytes(self) -> float:
        return sum(o.bus_bytes for o in self.ops)

    @property
    def comm_bytes(self) -> float:
        """Per-rank bytes on the wire: collective bus bytes + max(p2p sent, p2p received)."""
        return self.bus_bytes + max(sum(o.sent for o in self.ops), sum(o.recv for o in self.ops))

    def by_op(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for o in self.ops:
            out[o.name] = out.get(o.name, 0.0) + o.bus_bytes + o.sent + o.recv
        return out


@dataclass
class Trace:
    """What one rank's call of a task did (inputs to the roofline)."""

    flops: float
    hbm_bytes: float
    comm_bytes: float
    comm_by_op: dict[str, float] = field(default_factory=dict)
    conv_flops: float = 0.0  # part of `flops` in convolutions (cuDNN may use TF32 for fp32)
    tf32: dict[str, bool] = field(default_factory=dict)  # {"matmul": ..., "conv": ...} as run


def _conv_flops(fc: Any) -> float:
    counts = fc.get_flop_counts().get("Global", {})
    return float(sum(v for k, v in counts.items() if "conv" in str(k)))


def causal_pairs(lq: int, lk: int) -> int:
    """(query, key) pairs a causal mask keeps: query i sees keys j <= i (top-left aligned)."""
    m = min(lq, lk)
    return m * (m + 1) // 2 + (lq - m) * lk


class CausalAttention(TorchFunctionMode):
    """FLOPs that causal scaled_dot_product_attention calls may skip: the flop counter counts the
    full score square (where it counts the kernel at all), the kernels only the kept pairs."""

    def __init__(self, counter: Any) -> None:
        super().__init__()
        self.counter, self.skipped = counter, 0.0

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if not (func is F.scaled_dot_product_attention and kwargs.get("is_causal", len(args) > 5 and args[5])):
            return func(*args, **kwargs)
        before = self.counter.get_total_flops()
        out = func(*args, **kwargs)
        lq, lk = args[0].shape[-2], args[1].shape[-2]
        self.skipped += (self.counter.get_total_flops() - before) * (1.0 - causal_pairs(lq, lk) / (lq * lk))
        return out


def trace_call(fn: Callable, args: tuple) -> tuple[Any, Trace]:
    """Run fn(*args) once, counting FLOPs (less what causal attention skips) and communication;
    returns (output, trace)."""
    from torch.utils.flop_counter import FlopCounterMode

    with CommCounter() as cc, FlopCounterMode(display=False) as fc, CausalAttention(fc) as ca:
        out = fn(*args)
    tf32 = {"matmul": bool(torch.backends.cuda.matmul.allow_tf32), "conv": bool(torch.backends.cudnn.allow_tf32)}
    return out, Trace(
        float(fc.get_total_flops()) - ca.skipped,
        float(tensor_bytes(args) + tensor_bytes(out)),
        cc.comm_bytes,
        cc.by_op(),
        _conv_flops(fc),
        tf32,
    )


@dataclass
class Roofline:
    """Lower bound of one call's time: the slowest of compute, memory and communication."""

    flops: float
    hbm_bytes: float
    comm_bytes: float
    compute_ms: float
    memory_ms: float
    comm_ms: float
    bound_ms: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def matmul_rate(ceilings: dict[str, Any], dtype: str, tf32: bool = False) -> float:
    """TFLOP/s for a dtype; unknown dtypes take the fastest measured rate (keeps it a lower bound).
    float32 work that the library may run in TF32 (`tf32`) takes the TF32 rate."""
    rates = ceilings["matmul_tflops"]
    if dtype == "float32" and tf32:
        return rates.get("tfloat32") or max(rates.values())
    return rates.get(dtype) or max(rates.values())


def compute_ms(tr: Trace, ceilings: dict[str, Any], dtype: str) -> float:
    conv, other = tr.conv_flops, tr.flops - tr.conv_flops
    return (
        (
            other / matmul_rate(ceilings, dtype, tr.tf32.get("matmul", False))
            + conv / matmul_rate(ceilings, dtype, tr.tf32.get("conv", False))
        )
        / 1e12
        * 1e3
    )


def roofline(traces: list[Trace], ceilings: dict[str, Any], dtype: str) -> Roofline:
    """Roofline over ranks: each term is the max over ranks (the slowest rank sets the time)."""
    flops = max(t.flops for t in traces)
    hbm = max(t.hbm_bytes for t in traces)
    comm = max(t.comm_bytes for t in traces)
    c_ms = max(compute_ms(t, ceilings, dtype) for t in traces)
    memory_ms = hbm / (ceilings["hbm_GBps"] * 1e9) * 1e3
    link = ceilings.get("link_GBps") or 0.0
    comm_ms = comm / (link * 1e9) * 1e3 if comm and link else 0.0
    return Roofline(flops, hbm, comm, c_ms, memory_ms, comm_ms, max(c_ms, memory_ms, comm_ms))


def fraction_of_roofline(bound_ms: float, measured_ms: float | None) -> float | None:
    return bound_ms / measured_ms if measured_ms else None
