"""Handing a rank its part of the oracle's output without host copies, where ranks share a host.

When ranks share a GPU, rank 0 solves the unsharded float64 problem once and hands every other rank its
part (validation/checks.py::expected_output). Through host memory that costs a device-to-host copy, a
gloo send over loopback and a host-to-device copy: on one H100 at world size 8 the oracle phase took
2-3.5 s an item (results/cuda-shared-pass11-*), most of it moving 1-2 GiB of float64 parts. A transport
here hands over a handle instead: the receiver opens rank 0's memory and copies its part device to
device. rank 0 keeps its parts alive until every rank has its copy; where any rank fails to open one,
every rank falls back to the host handoff (checks.py), so a transport can only save time, never a verdict.

TRANSPORTS names a transport for each device type; a part is handed this way only when every tensor in it
is one the transport can share (`shareable`) and every rank is on rank 0's device (`same_device`).

After a fallback, rank 0 hands nothing by handle again in that process (`give_up`): a handle that a rank
never opened keeps its block counted as shared (torch frees a shared CUDA block only once every receiver
released it), so a failing transport costs one oracle output's memory at most, not one per item.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler
from typing import Any, Protocol

import torch
import torch.multiprocessing  # noqa: F401  registers torch's tensor reductions (CUDA IPC handles) with ForkingPickler

from mgbench.validation.compare import map_tree


@dataclass(frozen=True)
class Shared:
    """One rank's part as a handle the receiving rank opens (sent in place of the part's bytes)."""

    transport: str
    blob: bytes


class Transport(Protocol):
    name: str

    def shareable(self, tensor: torch.Tensor) -> bool: ...

    def share(self, part: Any) -> bytes: ...

    def open(self, blob: bytes, device: torch.device) -> Any:
        """The part, every tensor in this rank's own memory on `device`, its copies finished."""
        ...


def _plain(t: torch.Tensor) -> bool:
    """A dense tensor with nothing a reduction would lose (no subclass, attributes, autograd or lazy bits)."""
    return (
        type(t) is torch.Tensor
        and t.layout == torch.strided
        and not t.requires_grad
        and not t.__dict__
        and not t.is_conj()
        and not t.is_neg()
    )


class CudaIpc:
    """CUDA IPC handles through torch.multiprocessing's reductions: the receiver maps rank 0's allocation
    and copies its part out on its own device."""

    name = "cuda-ipc"

    def shareable(self, tensor: torch.Tensor) -> bool:
        return tensor.is_cuda and _plain(tensor)

    def share(self, part: Any) -> bytes:
        return bytes(ForkingPickler.dumps(part))

    def open(self, blob: bytes, device: torch.device) -> Any:
        mapped = pickle.loads(blob)  # tensors over rank 0's memory
        own = copy_tree(mapped, device)
        torch.cuda.synchronize(device)  # the copies are done before rank 0 may free what they read
        del mapped
        return own


TRANSPORTS: dict[str, Transport] = {"cuda": CudaIpc()}


GIVEN_UP: set[str] = set()  # device types whose transport failed in this process (see the module's docstring)


def give_up(device: torch.device) -> None:
    """No more handles from this process for this device type."""
    GIVEN_UP.add(device.type)


def same_device(world_size: int) -> bool:
    """Whether every rank runs on rank 0's device (CUDA: round-robin over the visible GPUs, as the shared-gpu
    backend places them; a rank on another GPU would map rank 0's GPU into a context of its own there)."""
    if not torch.cuda.is_available():
        return True
    from mgbench.backends import placement

    return len(set(placement(world_size, torch.cuda.device_count()))) == 1


SCALARS = (int, float, bool, complex, str, bytes, type(None), torch.dtype, torch.device)


def _tensors(obj: Any) -> list[torch.Tensor] | None:
    """The tensors of a tree of tuples, lists and dicts over tensors and scalars; None for anything else
    (an object could hide a tensor that copy_tree would not copy out of rank 0's memory)."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if type(obj) is dict and not all(isinstance(k, SCALARS) for k in obj):
        return None  # a tensor as a key would stay a mapping of rank 0's memory
    if type(obj) in (tuple, list, dict):
        found: list[torch.Tensor] = []
        for value in obj.values() if type(obj) is dict else obj:
            inner = _tensors(value)
            if inner is None:
                return None
            found += inner
        return found
    return [] if isinstance(obj, SCALARS) else None


def copy_tree(obj: Any, device: torch.device) -> Any:
    """`obj` (a tree _tensors accepts) with each tensor copied into this process's memory on `device`."""
    return map_tree(obj, lambda t: t.to(device, copy=True))


def transport_for(parts: list[Any], device: torch.device, world_size: int) -> Transport | None:
    """The transport that can hand out every tensor of these parts from `device` to every rank, or None."""
    transport = TRANSPORTS.get(device.type)
    if transport is None or device.type in GIVEN_UP:
        return None
    if device.type == "cuda" and not same_device(world_size):
        return None
    for part in parts:
        tensors = _tensors(part)
        if tensors is None or not all(transport.shareable(t) for t in tensors):
            return None
    return transport
