"""Rank-side job for tests/test_oracle_devices.py (imported in gloo rank processes): a CPU-only check that a
task's reference and oracle keep every tensor on the device of their inputs.

On a CPU machine every tensor is on the CPU, so a tensor a task builds without `device=` (it lands on the
default device, the CPU) is indistinguishable from one on its inputs' device, and the mix that raises on a
GPU ("Expected all tensors to be on the same device ... cuda:0 and cpu") passes. This mode simulates the GPU
run: a tensor made by a factory call (torch.zeros, torch.arange, torch.tensor, ...) in the task's own code
without a `device` argument is tagged HOST, the tag follows it through every torch op (an op on HOST tensors
only gives HOST; `.to(device)` or `.to(other)` moves it), and an op that mixes a HOST tensor with one on the
inputs' device is a violation, with the rules CUDA applies: a 0-dim HOST tensor is a CPU scalar and mixes
freely; a device tensor may be indexed with HOST indices; `copy_` copies across devices. HOST tensors in a
collective (NCCL takes none) or among the outputs are violations too.

The "meta" device cannot stand in for the GPU here: an op that mixes meta and CPU tensors raises in most
kernels, but indexing does not (a CPU tensor indexed or assigned with meta indices passes silently), and meta
tensors have no data, so the many tasks whose reference reads values (.tolist(), nonzero, boolean masks)
cannot run on it.
"""

from __future__ import annotations

import os
import sys
import weakref
from typing import Any

import torch
import torch.distributed as dist
from probe_jobs import DevicePlacementProbe
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from mgbench.validation.worker import register

FACTORIES = {
    getattr(torch, name)
    for name in (
        "empty",
        "empty_strided",
        "zeros",
        "ones",
        "full",
        "arange",
        "range",
        "linspace",
        "logspace",
        "eye",
        "tensor",
        "as_tensor",
        "asarray",
        "scalar_tensor",
        "rand",
        "randn",
        "randint",
        "randperm",
        "normal",
        "tril_indices",
        "triu_indices",
        "from_numpy",
        "hann_window",
        "hamming_window",
        "blackman_window",
        "bartlett_window",
        "kaiser_window",
    )
    if hasattr(torch, name)
}
# functions that keep their data's device when given a tensor: torch.tensor(t) or torch.as_tensor(t)
DATA_FACTORIES = {torch.tensor, torch.as_tensor, torch.asarray}
# collectives whose tensors must be on the device (NCCL takes no CPU tensor); isend/irecv are left alone
# because P2POp checks its op by identity (batch_isend_irecv sees their tensors)
COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "send",
    "recv",
    "batch_isend_irecv",
)
_TORCH_DIR = os.path.dirname(torch.__file__)


class HostTagMode(TorchFunctionMode):
    """Tags the tensors the task module at `path` creates without a device, and records the ops that mix them
    with device tensors (`violations`) and every such factory call (`factory_calls`, each `name:line`)."""

    def __init__(self, path: str):
        super().__init__()
        self.path = os.path.abspath(path)
        self.host: dict[int, Any] = {}  # id -> weakref of the HOST tensors
        self.violations: list[str] = []
        self.factory_calls: list[str] = []

    def is_host(self, t: torch.Tensor) -> bool:
        ref = self.host.get(id(t))
        return ref is not None and ref() is t

    def tag(self, t: torch.Tensor, host: bool) -> None:
        if host:
            self.host[id(t)] = weakref.ref(t)
        else:
            self.host.pop(id(t), None)

    def task_line(self) -> int | None:
        """The line of the task module this call came from, if the first frame outside torch and this file is
        in the task module."""
        f = sys._getframe(2)
        while f is not None and (f.f_code.co_filename.startswith(_TORCH_DIR) or f.f_code.co_filename == __file__):
            f = f.f_back
        if f is not None and os.path.abspath(f.f_code.co_filename) == self.path:
            return f.f_lineno
        return None

    def where(self) -> str:
        f = sys._getframe(2)
        while f is not None and os.path.abspath(f.f_code.co_filename) != self.path:
            f = f.f_back
        return f"line {f.f_lineno}" if f is not None else "?"

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", str(func))
        if func in FACTORIES and kwargs.get("device") is None:
            line = self.task_line()
            data_on_device = func in DATA_FACTORIES and args and isinstance(args[0], torch.Tensor)
            if line is not None and not data_on_device:
                self.factory_calls.append(f"{name}:{line}")
                for t in tree_flatten(out)[0]:
                    if isinstance(t, torch.Tensor):
                        self.tag(t, True)
                return out
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        if not tensors:
            return out
        host = [t for t in tensors if self.is_host(t)]
        dev = [t for t in tensors if not self.is_host(t)]
        host_big = [t for t in host if t.dim() > 0]
        if host_big and dev and not self.allowed(func, args, kwargs):
            self.violations.append(
                f"{name} mixes a tensor made without device= with the inputs' device ({self.where()})"
            )
        if func is torch.Tensor.cpu:
            out_host = True
        elif func is torch.Tensor.to:
            moved = [a for a in (*args[1:], *kwargs.values()) if isinstance(a, (str, torch.device, torch.Tensor))]
            if moved:
                other = moved[0]
                out_host = self.is_host(other) if isinstance(other, torch.Tensor) else False
            else:
                out_host = self.is_host(args[0])
        elif func is torch.Tensor.__setitem__ or (args and out is args[0]):  # in place: the tensor stays put
            out_host = self.is_host(args[0])
        else:
            out_host = bool(host) and not [t for t in dev if t.dim() > 0 or not host_big]
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.tag(t, out_host)
        return out

    def allowed(self, func, args, kwargs) -> bool:
        """Mixes that CUDA accepts: a device tensor indexed (or assigned) with HOST indices, cross-device
        copies and moves."""
        if func in (torch.Tensor.to, torch.Tensor.copy_, torch.Tensor.cpu, torch.Tensor.cuda):
            return True
        if func is torch.Tensor.__getitem__:
            return not self.is_host(args[0])
        if func is torch.Tensor.__setitem__:
            index, value = tree_flatten(args[1])[0], args[2]
            if not any(isinstance(i, torch.Tensor) for i in index):
                return True  # basic indexing assigns by copy_, across devices
            value_host = isinstance(value, torch.Tensor) and self.is_host(value) and value.dim() > 0
            return not self.is_host(args[0]) and not value_host  # index_put_: HOST indices only
        return False

    def host_outputs(self, obj: Any) -> bool:
        return any(isinstance(t, torch.Tensor) and self.is_host(t) for t in tree_flatten(obj)[0])


def _patched_collectives(mode: HostTagMode) -> dict[str, Any]:
    saved = {}

    def wrap(name, fn):
        def checked(*args, **kwargs):
            flat = tree_flatten((args, kwargs))[0]
            flat += [op.tensor for op in flat if isinstance(op, dist.P2POp)]
            if any(isinstance(t, torch.Tensor) and mode.is_host(t) for t in flat):
                mode.violations.append(f"dist.{name} gets a tensor made without device= ({mode.where()})")
            return fn(*args, **kwargs)

        return checked

    for name in COLLECTIVES:
        saved[name] = getattr(dist, name)
        setattr(dist, name, wrap(name, saved[name]))
    return saved


def device_placement_job(job, ctx) -> dict[str, Any]:
    from mgbench.validation.contract import load_module

    mod = load_module(job.path)
    size, seed = "smoke", 0
    inputs = mod.make_inputs(ctx.rank, ctx.world_size, seed=seed, device=ctx.device, size=size)
    report: dict[str, Any] = {"rank": ctx.rank}
    mode = HostTagMode(job.path)
    saved = _patched_collectives(mode)
    try:
        with mode:
            out = mod.solution(*inputs)
        if mode.host_outputs(out):
            mode.violations.append("solution's output holds a tensor made without device=")
    finally:
        for name, fn in saved.items():
            setattr(dist, name, fn)
    report["solution"] = sorted(set(mode.violations))
    report["solution_factories"] = sorted(set(mode.factory_calls))
    if ctx.rank == 0 and job.has_oracle:
        all_inputs = [
            inputs if r == 0 else mod.make_inputs(r, ctx.world_size, seed=seed, device=ctx.device, size=size)
            for r in range(ctx.world_size)
        ]
        mode = HostTagMode(job.path)
        with mode:
            expected = mod.oracle(all_inputs, ctx.world_size)
        report["oracle"] = sorted(set(mode.violations))
        # not a failure: validation compares on the expected output's device or the CPU (compare.py), and
        # such tasks pass on GPUs (l1-gather-root0's empty outputs of non-root ranks, counts built on the CPU)
        report["oracle_host_outputs"] = mode.host_outputs(expected)
        report["oracle_factories"] = sorted(set(mode.factory_calls))
    return report


register(DevicePlacementProbe, device_placement_job)
