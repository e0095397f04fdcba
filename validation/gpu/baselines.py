"""Baselines of a task, built on a rank: the eager reference, torch.compile of it, and
vendor-fused versions where PyTorch ships one for the family (symmetric-memory ops).

NVLink multicast is off on our machines (TORCH_SYMM_MEM_DISABLE_MULTICAST=1): only the
peer-to-peer symmetric-memory kernels are used (one_shot / two_shot all-reduce,
fused_all_gather_matmul, fused_matmul_reduce_scatter), never multimem ones.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

NOT_APPLICABLE = "n/a"


class NotApplicable(Exception):
    """The baseline does not exist for this task (recorded as status n/a)."""


@dataclass
class Built:
    """A ready-to-time callable with the same signature as the task's solution."""

    fn: Callable[..., Any]
    setup_s: float = 0.0
    note: str = ""


def _group_name() -> str:
    return dist.group.WORLD.group_name


def _symm_ready(device: torch.device) -> Any:
    """The symm_mem module, with symmetric memory enabled for the world group."""
    if device.type != "cuda":
        raise NotApplicable("symmetric memory needs CUDA devices")
    import torch.distributed._symmetric_memory as symm_mem

    enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
    if enable is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            enable(_group_name())
    return symm_mem


def _symm_buffer(like: torch.Tensor) -> torch.Tensor:
    import torch.distributed._symmetric_memory as symm_mem

    buf = symm_mem.empty(like.numel(), dtype=like.dtype, device=like.device)
    symm_mem.rendezvous(buf, _group_name())
    return buf


def _ops() -> Any:
    return torch.ops.symm_mem


def _one_shot(x_like: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """One-shot all-reduce of a plain tensor: copy into the symmetric buffer (fused where the
    op exists), then every rank reads all peers' buffers."""
    buf, g = _symm_buffer(x_like), _group_name()
    if hasattr(_ops(), "one_shot_all_reduce_copy"):
        return lambda x: _ops().one_shot_all_reduce_copy(buf, x.reshape(-1), "sum", g).view(x.shape)

    def fn(x: torch.Tensor) -> torch.Tensor:
        buf.copy_(x.reshape(-1))
        return _ops().one_shot_all_reduce(buf, "sum", g).view(x.shape)

    return fn


def _has_kwarg(op: Any, name: str) -> bool:
    try:
        return any(a.name == name for a in op.default._schema.arguments)
    except (AttributeError, RuntimeError):
        return False


def _two_shot_into(buf: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """All-reduce the contents of a symmetric buffer into a fresh tensor."""
    g = _group_name()
    if hasattr(_ops(), "two_shot_all_reduce_out"):

        def fn(shape: torch.Size) -> torch.Tensor:
            out = torch.empty(buf.numel(), dtype=buf.dtype, device=buf.device)
            return _ops().two_shot_all_reduce_out(buf, "sum", g, out).view(shape)

        return fn
    return lambda shape: _ops().two_shot_all_reduce_(buf, "sum", g).clone().view(shape)


def _all_reduce_sum(task: dict[str, Any]) -> None:
    if task.get("params", {}).get("op", "sum") != "sum":
        raise NotApplicable("symmetric-memory all-reduce kernels reduce with sum only")


def vendor_all_reduce(name: str, inputs: tuple, task: dict[str, Any]) -> Callable:
    _all_reduce_sum(task)
    (x,) = inputs
    if name == "one_shot":
        return _one_shot(x)
    buf = _symm_buffer(x)
    reduce = _two_shot_into(buf)

    def fn(x: torch.Tensor) -> torch.Tensor:
        buf.copy_(x.reshape(-1))
        return reduce(x.shape)

    return fn


def vendor_ag_gemm(name: str, inputs: tuple, task: dict[str, Any]) -> Callable:
    g, op = _group_name(), _ops().fused_all_gather_matmul
    kw = {"return_A": False} if _has_kwarg(op, "return_A") else {}
    return lambda x, w: op(x, [w], 0, g, **kw)[1][0]


def vendor_gemm_rs(name: str, inputs: tuple, task: dict[str, Any]) -> Callable:
    g = _group_name()
    return lambda x, w: _ops().fused_matmul_reduce_scatter(x, w, "sum", 0, g)


def vendor_gemm_ar(name: str, inputs: tuple, task: dict[str, Any]) -> Callable:
    x, w = inputs
    out_like = torch.empty(x.shape[0], w.shape[1], dtype=x.dtype, device=x.device)
    if name == "one_shot":
        ar = _one_shot(out_like)
        return lambda x, w: ar(x @ w)
    buf = _symm_buffer(out_like)
    reduce = _two_shot_into(buf)

    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        torch.mm(x, w, out=buf.view(x.shape[0], w.shape[1]))
        return reduce(torch.Size((x.shape[0], w.shape[1])))

    return fn


# family -> (vendor baseline names, builder(name, inputs, task) -> callable)
VENDOR: dict[str, tuple[tuple[str, ...], Callable[[str, tuple, dict[str, Any]], Callable]]] = {
    "all_reduce": (("one_shot", "two_shot"), vendor_all_reduce),
    "ag_gemm": (("fused_all_gather_matmul",), vendor_ag_gemm),
    "gemm_rs": (("fused_matmul_reduce_scatter",), vendor_gemm_rs),
    "gemm_ar": (("one_shot", "two_shot"), vendor_gemm_ar),
}


def vendor_names(task: dict[str, Any]) -> list[str]:
    """The symm_mem_<name> baselines that exist for a task's family (empty if none)."""
    names, _ = VENDOR.get(task.get("family", ""), ((), None))
    return [f"symm_mem_{n}" for n in names]


def build(baseline: str, mod: Any, inputs: tuple, task: dict[str, Any], device: torch.device) -> Built:
    """Build a baseline callable on this rank (collective: every rank builds the same one)."""
    t0 = time.perf_counter()
    if baseline == "eager":
        return Built(mod.solution)
    if baseline == "compile":
        from torch import _dynamo

        _dynamo.reset()
        fn = torch.compile(mod.solution)
        fn(*inputs)  # compiles here, so the timing budget is not spent on it
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return Built(fn, time.perf_counter() - t0)
    if baseline.startswith("symm_mem_"):
        names, builder = VENDOR.get(task.get("family", ""), ((), None))
        name = baseline.removeprefix("symm_mem_")
        if builder is None or name not in names:
            raise NotApplicable(f"no PyTorch symmetric-memory op for family {task.get('family')!r}")
        _symm_ready(device)
        fn = builder(name, inputs, task)
        fn(*inputs)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return Built(fn, time.perf_counter() - t0)
    raise NotApplicable(f"unknown baseline {baseline!r}")
