"""Per-rank correctness checks of one task (runs inside a rank process, under a process group).

Every rank computes its verdicts locally; the tolerance is agreed across ranks (max) so the
degenerate-candidate checks use the same tolerance the task will publish.
"""

from __future__ import annotations

import gc
import math
import os
import pickle
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from mgbench.validation import oracle_parts, part_transport
from mgbench.validation.compare import (
    MARGIN_MIN,
    Tolerance,
    calibrate,
    compare,
    computation_ceiling,
    default_tolerance,
    leaves,
    map_tree,
)
from mgbench.validation.contract import check_contract


def tensors_of(obj: Any) -> list[torch.Tensor]:
    return [v for _, v in leaves(obj) if isinstance(v, torch.Tensor)]


def clone_tree(obj: Any, memo: dict[int, Any] | None = None) -> Any:
    """A copy of nested tensors; Python attributes set on a tensor (`param.main_grad`) are copied too, a
    parameter stays a parameter with its gradient, a tensor reached twice is copied once (`memo`, as in
    deepcopy: shared and cyclic references survive)."""
    memo = {} if memo is None else memo
    if isinstance(obj, torch.Tensor):
        if id(obj) in memo:
            return memo[id(obj)]
        out = memo[id(obj)] = obj.detach().clone()
        if isinstance(obj, torch.nn.Parameter):
            out = memo[id(obj)] = torch.nn.Parameter(out, requires_grad=obj.requires_grad)
            out.grad = None if obj.grad is None else clone_tree(obj.grad, memo)
        if obj.__dict__:
            out.__dict__.update({k: clone_tree(v, memo) for k, v in obj.__dict__.items()})
        return out
    if isinstance(obj, (tuple, list)):
        return type(obj)(clone_tree(v, memo) for v in obj)
    if isinstance(obj, dict):
        return {k: clone_tree(v, memo) for k, v in obj.items()}
    return obj


def same_tensor(x: torch.Tensor, y: torch.Tensor) -> bool:
    """torch.equal that also takes sparse tensors (torch has no sparse `equal`): same layout and the same
    values in dense form (an input of the peer's kind may be a sparse COO tensor)."""
    if x.layout != torch.strided or y.layout != torch.strided:
        return x.layout == y.layout and x.shape == y.shape and torch.equal(x.to_dense(), y.to_dense())
    return torch.equal(x, y)


def unchanged(before: Any, after: Any) -> bool:
    a, b = tensors_of(before), tensors_of(after)
    return len(a) == len(b) and all(x.shape == y.shape and same_tensor(x, y) for x, y in zip(a, b))


def echo_of(out: Any, inputs: tuple) -> Any | None:
    """A candidate that returns its inputs: each output leaf replaced by an input of equal numel."""
    pool = [t for t in tensors_of(inputs) if t.numel() > 0]

    def pick(t: torch.Tensor) -> torch.Tensor:
        for x in pool:
            if x.numel() == t.numel():
                return x.reshape(t.shape).to(t.dtype)
        return t.new_zeros(t.shape)

    echoed = map_tree(out, pick)
    return echoed if any(x.numel() for x in tensors_of(out)) else None


def _agree_max(value: float, device: torch.device) -> float:
    t = torch.tensor([value if math.isfinite(value) else 1e30], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def _out_dtype(out: Any, fallback: str) -> str:
    floats = [t for t in tensors_of(out) if t.is_floating_point() or t.is_complex()]
    return str(floats[0].dtype).removeprefix("torch.") if floats else fallback


# Host bytes a second the shared-GPU oracle handoff moves, in round figures (benchmarks/oracle_handoff.py:
# 3 x 512 MiB in 1.6-2.2 s on 2 CPU cores, at 4 ranks). Handing parts out is chosen when it is cheaper
# than every other rank solving the problem again; a trivial oracle with a large output (an all-gather)
# is solved again.
HANDOFF_BYTES_PER_S = 1e9
# how parts are handed out: "device" by a handle to rank 0's memory where part_transport has a transport for
# the device (CUDA IPC: a device-to-device copy, no host trip, no solving again), else through host memory;
# "host" always through host memory
HANDOFF = os.environ.get("MGBENCH_ORACLE_HANDOFF", "device")
# the route this process's last expected_output took: "device", "host", "solve-again" or "whole" (a test
# and the GPU pass read it to tell a working handle route from a silent fallback)
LAST_ROUTE = ""


def expected_output(
    mod: Any, inputs: tuple, rank: int, world_size: int, device: torch.device, size: str, seed: int, in_turns: bool
) -> Any:
    """This rank's oracle output: the unsharded problem in one process, from every rank's inputs.

    With `in_turns` (ranks sharing one GPU), one unsharded float64 problem is in memory at a time, not N
    (an attention oracle's score matrix is 64 GiB at full size): rank 0 solves it while the others wait,
    then either hands each rank its part through host memory or, when the parts are large and the solve
    was quick (HANDOFF_BYTES_PER_S), lets ranks 1..N-1 solve it again one after another, each keeping
    only its own part. A handed part crosses as its tree's skeleton (scatter_object_list, small) and the
    raw bytes of its tensors (CPU isend/irecv, every rank at once): pickling whole parts through
    scatter_object_list cost 3-4 times as much at 128-512 MiB a part. Where part_transport has a transport
    for the device (CUDA IPC), a part crosses as a handle instead and is copied device to device; if any
    rank cannot open its handle, every rank takes the host route (HANDOFF). An oracle that raises on rank 0
    raises on every rank, so none waits for a part that never comes."""

    split = oracle_parts.split_here(Path(getattr(mod, "__file__", "") or "task").stem, device)

    def compute() -> list:
        all_inputs = [
            inputs if r == rank else mod.make_inputs(r, world_size, seed=seed, device=device, size=size)
            for r in range(world_size)
        ]
        # with a split, heads a few at a time: the whole float64 problem does not fit one GPU
        return oracle_parts.solve(mod.oracle, all_inputs, world_size, split)

    global LAST_ROUTE
    LAST_ROUTE = "whole"
    if not in_turns:
        return compute()[rank]
    headers: list = [None] * world_size
    payloads: list[list[torch.Tensor]] = []
    own, error, kept = None, None, None
    if rank == 0:
        try:
            own, headers, payloads, kept = _solve_on_rank0(compute, world_size, device)
            pickle.dumps(headers)  # a part scatter_object_list cannot send fails here, before the others wait
        except Exception as e:
            headers, error = [_OracleFailure(f"{type(e).__name__}: {e}")] * world_size, e
            traceback.clear_frames(e.__traceback__)  # its frames hold every rank's inputs and the oracle's tensors
        _release(device)
    received: list = [None]
    dist.scatter_object_list(received, headers if rank == 0 else None, src=0)
    if rank == 0 and error is not None:
        raise error
    header = received[0]
    if isinstance(header, _OracleFailure):
        raise RuntimeError(f"the oracle failed on rank 0: {header.reason}")
    if isinstance(header, _SolveAgain):
        LAST_ROUTE = "solve-again"
        return _solve_in_turns(compute, rank, world_size, device, own)
    if kept is not None or isinstance(header, part_transport.Shared):
        opened = _open_shared(header, rank, device)
        agreed = torch.tensor([int(opened is not _NOT_OPENED)])
        dist.all_reduce(agreed, op=dist.ReduceOp.MIN)  # also: rank 0 keeps `kept` until every copy is done
        if agreed.item():
            LAST_ROUTE = "device"
            if rank == 0:
                kept = None
                _release(device)  # the whole output, before the checks that follow need the memory
            return own if rank == 0 else opened
        # some rank could not open its handle: every rank takes its part through host memory instead
        if rank == 0:
            part_transport.give_up(device)
            try:
                headers, payloads = _host_headers(kept)
            except Exception as e:  # every rank raises below: none is left waiting for a part
                headers = [_OracleFailure(f"handing out the parts: {type(e).__name__}: {e}")] * world_size
            kept = None
            _release(device)  # (a receiver released what it held when its open failed)
        opened = None
        received = [None]
        dist.scatter_object_list(received, headers if rank == 0 else None, src=0)
        header = headers[0] if rank == 0 else received[0]
        if isinstance(header, _OracleFailure):
            raise RuntimeError(f"the oracle failed on rank 0: {header.reason}")
    LAST_ROUTE = "host"
    if rank == 0:  # every rank's buffers at once: gloo sends to different peers concurrently
        for work in [dist.isend(chunk, dst) for dst, chunks in enumerate(payloads, start=1) for chunk in chunks]:
            work.wait()
        return own
    skeleton, nbytes = header
    payload = torch.empty(nbytes, dtype=torch.uint8)
    for work in [dist.irecv(payload[a:b], 0) for a, b in _extents(skeleton)]:
        work.wait()
    return _unpack(skeleton, payload, device)


_NOT_OPENED = object()


def _open_shared(header: Any, rank: int, device: torch.device) -> Any:
    """This rank's part from its handle (rank 0: None), or _NOT_OPENED where it cannot be opened here."""
    if rank == 0:
        return None
    transport = next((t for t in part_transport.TRANSPORTS.values() if t.name == header.transport), None)
    if transport is None:
        return _NOT_OPENED
    try:
        return transport.open(header.blob, device)
    except Exception:  # any failure to map or copy: the host handoff still delivers the part
        try:
            _release(device)
        except Exception:  # a sticky CUDA error: this rank must still join the vote, or the others wait
            pass
        return _NOT_OPENED


def _share_parts(parts: list, device: torch.device) -> list | None:
    """Headers handing each other rank its part by a handle (HANDOFF "device"), or None where none can."""
    transport = part_transport.transport_for(parts[1:], device, len(parts)) if HANDOFF == "device" else None
    if transport is None:
        return None
    try:
        return [None] + [part_transport.Shared(transport.name, transport.share(part)) for part in parts[1:]]
    except Exception:  # a part the transport refuses after all: through host memory, from now on
        part_transport.give_up(device)  # (parts shared before it stay counted as shared: once per process)
        return None


def _solve_on_rank0(compute: Any, world_size: int, device: torch.device) -> tuple[Any, list, list, list | None]:
    """Rank 0's solve: (its own part, the header for each rank, the byte chunks to send each other rank,
    the parts it must keep alive while the other ranks copy theirs out of its memory, or None)."""
    t0 = time.perf_counter()
    parts = compute()
    if len(parts) != world_size:
        raise ValueError(f"oracle returned {len(parts)} parts for {world_size} ranks")
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    solve_s = time.perf_counter() - t0
    own = clone_tree(parts[0])  # its own storage: a view would keep the whole output alive
    shared = _share_parts(parts, device)
    if shared is not None:  # a device-to-device copy costs less than any solve: no solving again
        return own, shared, [], parts
    others = sum(t.numel() * t.element_size() for part in parts[1:] for t in tensors_of(part))
    if (world_size - 1) * solve_s < others / HANDOFF_BYTES_PER_S:
        return own, [_SolveAgain()] * world_size, [], None
    return own, *_host_headers(parts), None


def _host_headers(parts: list) -> tuple[list, list[list[torch.Tensor]]]:
    """(a header for each rank, the byte chunks to send each other rank) handing parts[1:] through host memory."""
    packed = [_pack(part) for part in parts[1:]]
    return [None] + [(skeleton, nbytes) for skeleton, _, nbytes in packed], [chunks for _, chunks, _ in packed]


def _solve_in_turns(compute: Any, rank: int, world_size: int, device: torch.device, own: Any) -> Any:
    """Ranks 1..N-1 solve the problem one after another, each keeping only its own part; rank 0, which has
    its part (`own`), waits at the barriers between the turns with them."""
    expected, error = own, None
    for turn in range(1, world_size):
        if turn == rank:
            try:
                expected = clone_tree(compute()[rank])  # its own storage, not a view of the whole output
            except Exception as e:  # raised after the barriers: the other ranks must not wait for this one
                error = e
                traceback.clear_frames(e.__traceback__)  # frees what the failed solve held before the next turn
            _release(device)
        dist.barrier()
    if error is not None:
        raise error
    return expected


def _release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


@dataclass(frozen=True)
class _SolveAgain:
    """The header that tells a rank to solve the problem itself, in its turn."""


@dataclass(frozen=True)
class _OracleFailure:
    """What rank 0 hands every rank in place of its part when the oracle raised."""

    reason: str


@dataclass(frozen=True)
class _Slot:
    """Where a dense tensor of a shipped part lies in its byte buffer."""

    offset: int
    nbytes: int
    shape: tuple[int, ...]
    dtype: torch.dtype
    on_host: bool  # the oracle left it in host memory: it stays there (else it goes to the rank's device)


@dataclass(frozen=True)
class _Sparse:
    """A sparse tensor of a shipped part, pickled whole in the skeleton (rare, and small)."""

    tensor: torch.Tensor
    on_host: bool


_ALIGN = 16


def _pack(part: Any) -> tuple[Any, list[torch.Tensor], int]:
    """(skeleton, chunks, nbytes): `part` with each dense tensor replaced by its _Slot in a byte buffer of
    `nbytes`, and the host bytes of those tensors in slot order (sent one by one: no buffer is assembled);
    a sparse tensor stays in the skeleton as a host copy (it is pickled, and rare)."""
    chunks: list[torch.Tensor] = []
    offset = 0

    def slot(t: torch.Tensor) -> Any:
        nonlocal offset
        if t.layout != torch.strided:
            return _Sparse(t.detach().to("cpu", copy=True), t.device.type == "cpu")
        # resolve_conj/neg: a CPU view with a lazy conjugate or negation bit has no byte view
        raw = t.detach().to("cpu").resolve_conj().resolve_neg().contiguous().reshape(-1).view(torch.uint8)
        start = offset
        # each tensor starts on a 16-byte boundary: viewing bytes as a wider dtype needs aligned offsets
        offset += -(-raw.numel() // _ALIGN) * _ALIGN
        if raw.numel():
            chunks.append(raw)
        return _Slot(start, raw.numel(), tuple(t.shape), t.dtype, t.device.type == "cpu")

    skeleton = map_tree(part, slot)
    return skeleton, chunks, offset


def _extents(skeleton: Any) -> list[tuple[int, int]]:
    """The byte ranges of the skeleton's non-empty slots, in the order _pack took them (the send order)."""
    slots: list[_Slot] = []
    map_tree(skeleton, slots.append, leaf=_Slot)  # the walk _pack's map_tree made
    return [(s.offset, s.offset + s.nbytes) for s in slots if s.nbytes]


def _unpack(skeleton: Any, payload: torch.Tensor, device: torch.device) -> Any:
    """The part _pack took apart, its tensors on `device`, each with storage of its own."""

    def tensor(leaf: _Slot | _Sparse) -> torch.Tensor:
        where = torch.device("cpu") if leaf.on_host else device
        if isinstance(leaf, _Sparse):
            return leaf.tensor.to(where)
        raw = payload[leaf.offset : leaf.offset + leaf.nbytes]
        return raw.view(leaf.dtype).reshape(leaf.shape).to(where, copy=True)

    return map_tree(skeleton, tensor, leaf=(_Slot, _Sparse))


def run_checks(
    mod: Any,
    rank: int,
    world_size: int,
    device: torch.device,
    size: str,
    seed: int,
    has_oracle: bool = True,
    oracle_in_turns: bool = False,
) -> dict[str, Any]:
    """All contract checks of one task on this rank; returns a JSON-able verdict dict (`oracle_in_turns`:
    see expected_output)."""
    check_contract(mod, getattr(mod, "__file__", "task"), need_oracle=has_oracle)
    t0 = time.perf_counter()
    res: dict[str, Any] = {"rank": rank, "checks": {}, "phase_seconds": {}}
    c = res["checks"]
    lap = _Laps(res["phase_seconds"], device)
    inputs = mod.make_inputs(rank, world_size, seed=seed, device=device, size=size)
    if not isinstance(inputs, tuple):
        raise TypeError(f"make_inputs returned {type(inputs).__name__}, expected a tuple")
    # Drawing inputs dominates full-size checks on GPUs; make_inputs' determinism is the same code
    # at every size, so it is checked at smoke size only (None = not checked here).
    c["inputs_deterministic"] = None
    if size == "smoke":
        again = mod.make_inputs(rank, world_size, seed=seed, device=device, size=size)
        c["inputs_deterministic"] = unchanged(inputs, again)
    snapshot = clone_tree(inputs)
    lap("inputs")
    out = mod.solution(*inputs)
    c["inputs_not_mutated"] = unchanged(snapshot, inputs)
    out = clone_tree(out)
    out2 = clone_tree(mod.solution(*inputs))
    dtype = _out_dtype(out, "float32")
    c["deterministic"] = compare(out2, out, default_tolerance(dtype))[0]
    c["bitwise_deterministic"] = unchanged(out, out2)
    del out2  # ranks sharing one GPU at full size: every copy held counts
    lap("reference")
    other_inputs = mod.make_inputs(rank, world_size, seed=seed + 1, device=device, size=size)
    other = clone_tree(mod.solution(*other_inputs))
    del other_inputs
    lap("other_seed")
    if has_oracle:
        parked = oracle_in_turns and device.type == "cuda"
        if parked:  # what this rank keeps waits in host memory while the unsharded oracle has the device
            out, other, snapshot = (map_tree(t, lambda x: x.cpu()) for t in (out, other, snapshot))
            _release(device)
        expected = expected_output(mod, inputs, rank, world_size, device, size, seed, oracle_in_turns)
        if parked:
            out, other, snapshot = (map_tree(t, lambda x: x.to(device)) for t in (out, other, snapshot))
        exact = False
    else:
        expected, exact = out, True
    lap("oracle")
    local_tol, worst = calibrate(out, expected, dtype) if has_oracle else (default_tolerance(dtype), 0.0)
    wanted = _agree_max(local_tol.atol_rel, device)
    ceiling = computation_ceiling(inputs, out)
    atol_rel = min(wanted, ceiling)
    tol = Tolerance(local_tol.rtol, atol_rel)
    res["tolerance"] = tol.to_dict()
    res["max_error"] = _agree_max(worst, device)
    ok, why = compare(out, expected, tol, exact_dtype=exact)
    c["matches_oracle"] = ok if has_oracle else None
    c["tolerance_sane"] = res["max_error"] * MARGIN_MIN <= ceiling
    res["mismatch"] = None if ok else why
    # Degenerate candidates: "passes" per rank; the task is sound only if each fails on some rank.
    zeros = map_tree(out, torch.zeros_like)
    echo = echo_of(out, snapshot)
    res["degenerate_pass"] = {
        "zeros": compare(zeros, expected, tol, exact_dtype=exact)[0],
        "other_seed": compare(other, expected, tol, exact_dtype=exact)[0],
        "echo_inputs": compare(echo, expected, tol, exact_dtype=exact)[0] if echo is not None else True,
        "input_insensitive": compare(other, out, tol)[0],
    }
    lap("compare")
    res["seconds"] = time.perf_counter() - t0
    return res


class _Laps:
    """Seconds per phase of run_checks (where a full-size check's time goes: its inputs, the reference, the
    oracle...), into `into`; on a GPU each lap waits for the device's queued work, so a phase is charged
    for its kernels, not only for launching them."""

    def __init__(self, into: dict[str, float], device: torch.device):
        self.into, self.device, self.mark = into, device, time.perf_counter()

    def __call__(self, phase: str) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        now = time.perf_counter()
        self.into[phase] = round(self.into.get(phase, 0.0) + now - self.mark, 4)
        self.mark = now
