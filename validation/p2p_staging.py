"""Point-to-point of CUDA tensors through host memory, for ranks joined by gloo (the shared-gpu backend).

gloo runs the collectives on CUDA tensors, but its send/recv of a CUDA tensor fails (`writev ... Bad
address`) and breaks the pair, and torch 2.11's gloo has no list-form all_to_all at all. A task's
reference must run unchanged (its text is hashed), so the rank process, not the task, stages them:
install() replaces torch.distributed's send, recv, isend, irecv and all_to_all (the package's names and
distributed_c10d's globals, which P2POp and batch_isend_irecv check against) with versions that send a
host copy of a CUDA tensor and receive into a host buffer that is copied to the device tensor when the
receive completes (all_to_all: pairwise host exchanges). CPU tensors pass through untouched.

Only rank processes call install(); the judging side never runs under it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

NAMES = ("send", "recv", "isend", "irecv", "all_to_all")
_ORIGINAL: dict[str, Any] = {}
# Staged calls of this process by name: what a run staged (a record can say so; the tests check it).
STAGED_CALLS: dict[str, int] = dict.fromkeys(NAMES, 0)


def _is_cuda(tensor: torch.Tensor) -> bool:
    return tensor.is_cuda


# Which tensors are staged: CUDA ones; the CPU tests stage every tensor to exercise the same path.
_stage_if: list[Callable[[torch.Tensor], bool]] = [_is_cuda]


def _host_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous host copy of `tensor`, taken after the device work queued before it."""
    return tensor.detach().to("cpu", copy=True).contiguous()  # copy=True: never the caller's own storage


def _host_buffer(tensor: torch.Tensor) -> torch.Tensor:
    return torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu")


class StagedWork:
    """The Work of a staged isend or irecv: it keeps the host buffer alive until the transfer completes,
    and for a receive copies the buffer into the device tensor (once) when waited on. Other attributes
    are the host Work's."""

    def __init__(self, work: Any, host: torch.Tensor, target: torch.Tensor | None = None):
        self._work, self._host, self._target = work, host, target

    def wait(self, *args: Any, **kwargs: Any) -> bool:
        done = self._work.wait(*args, **kwargs)
        if self._target is not None:
            self._target.copy_(self._host)
            self._target = None
        return done

    def is_completed(self) -> bool:
        return self._work.is_completed()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)


def _send(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> None:
    if not _stage_if[0](tensor):
        return _ORIGINAL["send"](tensor, *args, **kwargs)
    STAGED_CALLS["send"] += 1
    return _ORIGINAL["send"](_host_copy(tensor), *args, **kwargs)


def _recv(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> int:
    if not _stage_if[0](tensor):
        return _ORIGINAL["recv"](tensor, *args, **kwargs)
    STAGED_CALLS["recv"] += 1
    host = _host_buffer(tensor)
    sender = _ORIGINAL["recv"](host, *args, **kwargs)
    tensor.copy_(host)
    return sender


def _isend(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    if not _stage_if[0](tensor):
        return _ORIGINAL["isend"](tensor, *args, **kwargs)
    STAGED_CALLS["isend"] += 1
    host = _host_copy(tensor)
    work = _ORIGINAL["isend"](host, *args, **kwargs)
    return None if work is None else StagedWork(work, host)


def _irecv(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    if not _stage_if[0](tensor):
        return _ORIGINAL["irecv"](tensor, *args, **kwargs)
    STAGED_CALLS["irecv"] += 1
    host = _host_buffer(tensor)
    work = _ORIGINAL["irecv"](host, *args, **kwargs)
    return None if work is None else StagedWork(work, host, tensor)


class _Done:
    """The Work of an exchange already complete when it returns (async_op=True callers wait on it)."""

    def wait(self, *args: Any, **kwargs: Any) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def _all_to_all(output_tensor_list: list, input_tensor_list: list, group: Any = None, async_op: bool = False) -> Any:
    """The list form of all-to-all, which torch 2.11's gloo does not implement (`Backend gloo does not
    support alltoall`): host copies exchanged pairwise with the original isend/irecv, then copied back."""
    if not any(_stage_if[0](t) for t in [*output_tensor_list, *input_tensor_list]):
        return _ORIGINAL["all_to_all"](output_tensor_list, input_tensor_list, group=group, async_op=async_op)
    STAGED_CALLS["all_to_all"] += 1
    me = dist.get_rank(group)
    received = [_host_buffer(t) for t in output_tensor_list]
    works = []
    for peer, (src, dst) in enumerate(zip(input_tensor_list, received)):
        if peer == me:
            dst.copy_(src.detach().cpu())
            continue
        works.append(_ORIGINAL["isend"](_host_copy(src), group=group, group_dst=peer))
        works.append(_ORIGINAL["irecv"](dst, group=group, group_src=peer))
    for w in works:
        if w is not None:
            w.wait()
    for out, host in zip(output_tensor_list, received):
        out.copy_(host)
    return _Done() if async_op else None


STAGED = {"send": _send, "recv": _recv, "isend": _isend, "irecv": _irecv, "all_to_all": _all_to_all}


def install(stage_if: Callable[[torch.Tensor], bool] = _is_cuda) -> None:
    """Route this process's point-to-point calls of the tensors `stage_if` accepts (CUDA tensors) through
    host memory (idempotent)."""
    _stage_if[0] = stage_if
    if _ORIGINAL:
        return
    for name in NAMES:
        _ORIGINAL[name] = getattr(c10d, name)
        staged = STAGED[name]
        staged.__doc__ = f"torch.distributed.{name}, with CUDA tensors staged through host memory."
        setattr(c10d, name, staged)
        setattr(dist, name, staged)


def installed() -> bool:
    return bool(_ORIGINAL)
