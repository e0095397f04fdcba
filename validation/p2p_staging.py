"""Point-to-point of CUDA tensors through host memory, for ranks joined by gloo (the shared-gpu backend).

gloo runs every collective on CUDA tensors, but its send/recv of a CUDA tensor fails (`writev ... Bad
address`) and breaks the pair. A task's reference must run unchanged (its text is hashed), so the rank
process, not the task, stages point-to-point: install() replaces torch.distributed's send, recv, isend
and irecv (both the package's names and distributed_c10d's globals, which P2POp and batch_isend_irecv
check against) with versions that send a host copy of a CUDA tensor and receive into a host buffer that
is copied to the device tensor when the receive completes. CPU tensors pass through untouched.

Only rank processes call install(); the judging side never runs under it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

NAMES = ("send", "recv", "isend", "irecv")
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


class StagedReceive:
    """The Work of a staged irecv: waiting on it waits for the host receive, then copies the host buffer
    into the device tensor (once). Other attributes are the host Work's."""

    def __init__(self, work: Any, host: torch.Tensor, target: torch.Tensor):
        self._work, self._host, self._target, self._copied = work, host, target, False

    def _finish(self) -> None:
        if not self._copied:
            self._target.copy_(self._host)
            self._copied = True

    def wait(self, *args: Any, **kwargs: Any) -> bool:
        done = self._work.wait(*args, **kwargs)
        self._finish()
        return done

    def is_completed(self) -> bool:
        return self._work.is_completed()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)


class StagedSend:
    """The Work of a staged isend: it keeps the host copy alive until the send completes."""

    def __init__(self, work: Any, host: torch.Tensor):
        self._work, self._host = work, host

    def wait(self, *args: Any, **kwargs: Any) -> bool:
        return self._work.wait(*args, **kwargs)

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
    return None if work is None else StagedSend(work, host)


def _irecv(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    if not _stage_if[0](tensor):
        return _ORIGINAL["irecv"](tensor, *args, **kwargs)
    STAGED_CALLS["irecv"] += 1
    host = _host_buffer(tensor)
    work = _ORIGINAL["irecv"](host, *args, **kwargs)
    return None if work is None else StagedReceive(work, host, tensor)


STAGED = {"send": _send, "recv": _recv, "isend": _isend, "irecv": _irecv}


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
