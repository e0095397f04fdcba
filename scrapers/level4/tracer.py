"""What one rank's call of a task's `solution` does, recorded under a TorchDispatchMode (torch + stdlib).

Every aten/prims/c10d op the call dispatches is counted by name and classified through the tables
below: matrix products get their FLOPs from MATMUL_FLOPS (2*M*N*K and relatives), ops in NO_WORK
(views, allocations, fills, host reads) cost nothing, ops in DATA_MOVEMENT count the bytes they write,
every other op counts as elementwise work of max(numel in, numel out) (a reduction reads its input
once, a pointwise op writes its output once). Collectives are the dispatcher ops of the c10d namespaces
(`c10d.allreduce_` etc., seen on gloo and NCCL alike); their payload follows nccl-tests' "size": the
bytes of the largest tensor-argument group (all_reduce: the buffer; all_gather: the gathered output;
reduce_scatter: the scattered input; all_to_all: the buffer).

Ops issued from the synthesized harness's own bookkeeping (HARNESS_FRAMES: cloning inputs, comparing
arguments after the call) are counted apart, so a task's work is the mined code's work only."""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from math import prod
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

COLLECTIVE_NAMESPACES = ("c10d", "_c10d_functional", "_c10d_functional_autograd")
NOT_COLLECTIVES = {"wait_tensor", "wait"}  # c10d ops that move no data
MAX_SIGNATURE = 64  # collectives kept in order per rank (the rest counted)


def _shape(t: Any) -> list[int]:
    return list(t.shape)


def _mm(a: Any, b: Any, *_: Any, **__: Any) -> int:
    return 2 * a.shape[0] * a.shape[1] * b.shape[1]


def _bmm(a: Any, b: Any, *_: Any, **__: Any) -> int:
    return 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]


def _conv(x: Any, w: Any, *rest: Any, out: Any = None) -> int:
    """convolution(input, weight, bias, stride, padding, dilation, transposed, ...): each output element
    (each input element when transposed) is a dot over weight.shape[1:] (channels per group x kernel)."""
    transposed = len(rest) > 4 and bool(rest[4])
    return 2 * (x.numel() if transposed else out.numel()) * prod(w.shape[1:])


def _contracting(a: Any, b: Any, *_: Any, out: Any = None) -> int:
    """matmul / linear seen whole (under torch.inference_mode a dispatch mode gets the composite op, not
    the mm it decomposes into): each output element is a dot over a's last dimension."""
    return 2 * out.numel() * a.shape[-1]


def _einsum(equation: str, operands: Any, *_: Any, **__: Any) -> int:
    """einsum without an ellipsis: each point of the joint index space is one multiply-add."""
    inputs = equation.replace(" ", "").split("->")[0].split(",")
    if "." in equation or len(inputs) != len(operands):
        raise TypeError("einsum with an ellipsis or an unexpected operand list")
    sizes = {letter: size for spec, t in zip(inputs, operands) for letter, size in zip(spec, t.shape)}
    return 2 * prod(sizes.values())


def _sdpa(q: Any, k: Any, *_: Any, **__: Any) -> int:
    # softmax(q k^T) v: two products of [.., L, D] x [.., D, S]
    return 4 * prod(q.shape[:-2]) * q.shape[-2] * k.shape[-2] * q.shape[-1]


# aten op name -> FLOPs from its tensor arguments (and output for convolutions)
MATMUL_FLOPS: dict[str, Callable[..., int]] = {
    "mm": _mm,
    "_scaled_mm": _mm,
    "_int_mm": _mm,
    "addmm": lambda c, a, b, *r, **k: _mm(a, b),
    "_addmm_activation": lambda c, a, b, *r, **k: _mm(a, b),
    "bmm": _bmm,
    "baddbmm": lambda c, a, b, *r, **k: _bmm(a, b),
    "mv": lambda a, v, *r, **k: 2 * a.shape[0] * a.shape[1],
    "addmv": lambda c, a, v, *r, **k: 2 * a.shape[0] * a.shape[1],
    "dot": lambda a, b, *r, **k: 2 * a.numel(),
    "vdot": lambda a, b, *r, **k: 2 * a.numel(),
    "matmul": _contracting,
    "linear": _contracting,
    "einsum": _einsum,
    "convolution": _conv,
    "_convolution": _conv,
    "_scaled_dot_product_flash_attention_for_cpu": _sdpa,
    "_scaled_dot_product_flash_attention": _sdpa,
    "_scaled_dot_product_efficient_attention": _sdpa,
    "_scaled_dot_product_cudnn_attention": _sdpa,
}

# ops that compute nothing: views and metadata, allocations and fills, random draws, host reads
NO_WORK = frozenset(
    """
view _unsafe_view reshape expand permute transpose t squeeze unsqueeze select slice narrow as_strided alias
detach lift_fresh split split_with_sizes chunk unbind unfold view_as_real view_as_complex _reshape_alias
empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like ones ones_like full full_like
new_zeros new_ones new_full arange scalar_tensor fill_ fill zero_ resize_ set_ _local_scalar_dense
is_nonzero normal_ uniform_ randn randn_like rand rand_like randint randint_like random_ bernoulli_
randperm _to_dense sym_size sym_stride sym_numel sym_storage_offset is_same_size
""".split()
)

# ops that move or copy data without arithmetic: cost is the bytes they write
DATA_MOVEMENT = frozenset(
    """
copy_ clone _to_copy cat stack index_select gather scatter scatter_ index index_put_ index_put _unsafe_index
masked_select masked_scatter flip roll repeat constant_pad_nd embedding _index_put_impl_ select_scatter
slice_scatter diagonal_scatter as_strided_scatter tril triu contiguous _unsafe_index_put
""".split()
)

# ops whose result the host reads: on a GPU the host waits for the device
HOST_SYNCS = frozenset({"_local_scalar_dense", "item", "equal", "is_nonzero"})

# functions of the synthesized runtime (scrapers/harness/make/runtime*.py) whose ops are harness bookkeeping
HARNESS_FRAMES = frozenset(
    {
        "_mg_call",
        "_mg_call_auto",
        "_mg_call_settled",
        "_mg_bind",
        "_mg_rank_device",
        "_mg_drawn",
        "_mg_draw",
        "_mg_reported",
        "_mg_versions",
        "_mg_deep_same",
        "_mg_drawn_now",
        "_mg_report_changes",
        "_mg_tensors_in",
        "_mg_refill",
        "_mg_parts",
        "_mg_changed_parts",
        "_mg_clone",
        "_mg_same",
        "_mg_plain",
        "_mg_clean",
        "_mg_numbers",
        "_mg_attr_tensors",
        "_mg_wait",
        "_mg_has_tensor",
        "_mg_device",
        "_mg_target",
        "_mg_hosted",
        "_mg_recorder",
        "_mg_inputs",
        "_mg_value",
        "_mg_tensor",
        "_mg_fields",
        "_mg_module",
        "_mg_params",
    }
)

_SKIP_DIRS = (os.path.dirname(torch.__file__), os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.__file__))


@dataclass
class RankTrace:
    """One rank's call: counts by op, work, communication and the collective signature."""

    ops: dict[str, int] = field(default_factory=dict)
    harness_ops: dict[str, int] = field(default_factory=dict)
    mm_flops: int = 0
    elementwise_flops: int = 0
    moved_bytes: int = 0
    comm_bytes: int = 0
    comm_elems: int = 0  # elements of those payloads
    collectives: list[list[Any]] = field(default_factory=list)  # [op, dtype, [shapes...]] in call order
    collective_calls: int = 0
    host_syncs: int = 0
    inputs: list[list[Any]] = field(default_factory=list)  # [dtype, shape] of every tensor
    outputs: list[list[Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def tensors_of(x: Any) -> list[torch.Tensor]:
    """Every tensor inside nested tuples/lists/dicts, in order."""
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in tensors_of(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in tensors_of(v)]
    return []


def describe(x: Any) -> list[list[Any]]:
    """[dtype, shape] of every tensor in x (inputs and outputs of a call)."""
    return [[str(t.dtype).replace("torch.", ""), _shape(t)] for t in tensors_of(x)]


# harness frames that pass an op on for whoever called it (the CPU-placement mode of runtime/cuda_on_cpu.py):
# the op is the mined code's or the harness's as the frame below decides
PASS_THROUGH = frozenset({"__torch_function__"})


def _from_harness() -> bool:
    """Whether the innermost frame outside torch (and this file), pass-through frames skipped, is harness
    bookkeeping."""
    f = sys._getframe(2)
    while f is not None and (f.f_code.co_filename.startswith(_SKIP_DIRS) or f.f_code.co_name in PASS_THROUGH):
        f = f.f_back
    return f is not None and f.f_code.co_name in HARNESS_FRAMES


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class TraceMode(TorchDispatchMode):
    """Records every dispatched op of the calls made inside it into `self.trace`."""

    def __init__(self) -> None:
        super().__init__()
        self.trace = RankTrace()
        self._ops: Counter = Counter()
        self._harness: Counter = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        namespace, _, rest = func._schema.name.partition("::")
        name = rest
        if _from_harness():
            self._harness[f"{namespace}.{name}"] += 1
            return out
        self._ops[f"{namespace}.{name}"] += 1
        if namespace in COLLECTIVE_NAMESPACES:
            if name not in NOT_COLLECTIVES:
                self._collective(name, args, kwargs)
            return out
        self._work(name, args, kwargs, out)
        return out

    def _collective(self, name: str, args: tuple, kwargs: dict) -> None:
        groups = [tensors_of(a) for a in [*args, *kwargs.values()]]
        groups = [g for g in groups if g]
        flat = [t for g in groups for t in g]
        largest = max(groups, key=lambda g: sum(_nbytes(t) for t in g), default=[])
        self.trace.comm_bytes += sum(_nbytes(t) for t in largest)
        self.trace.comm_elems += sum(t.numel() for t in largest)
        self.trace.collective_calls += 1
        if len(self.trace.collectives) < MAX_SIGNATURE:
            dtype = str(flat[0].dtype).replace("torch.", "") if flat else ""
            self.trace.collectives.append([name, dtype, [_shape(t) for t in flat[:8]]])

    def _work(self, name: str, args: tuple, kwargs: dict, out: Any) -> None:
        t = self.trace
        if name in HOST_SYNCS:
            t.host_syncs += 1
        if name in NO_WORK:
            return
        tensors_in = [a for a in tensors_of(list(args)) if a.numel()]
        tensors_out = tensors_of(out)
        if name in MATMUL_FLOPS:
            try:
                t.mm_flops += int(MATMUL_FLOPS[name](*args, out=out))
                return
            except (IndexError, TypeError, AttributeError):
                pass  # an unexpected argument layout: fall back to elementwise counting
        if name in DATA_MOVEMENT:
            t.moved_bytes += sum(_nbytes(x) for x in tensors_out)
            return
        t.elementwise_flops += max([x.numel() for x in tensors_in + tensors_out], default=0)

    def __exit__(self, *exc: Any) -> Any:
        self.trace.ops = dict(sorted(self._ops.items()))
        self.trace.harness_ops = dict(sorted(self._harness.items()))
        return super().__exit__(*exc)


def trace_call(fn: Callable[..., Any], inputs: tuple) -> tuple[RankTrace, Any]:
    """Call fn(*inputs) under a TraceMode; the rank's trace (inputs and outputs described) and the output."""
    with TraceMode() as mode:
        out = fn(*inputs)
    mode.trace.inputs, mode.trace.outputs = describe(inputs), describe(out)
    return mode.trace, out
