"""One timed batch on a rank (reference or candidate side), inside the judge's clock.

The judge sends k input sets (bytes) and a fresh key with the batch; the rank materializes the
inputs, makes the k calls back to back, waits for its device and its pending collectives (gloo's
barrier waits for every collective issued before it), and answers with a fingerprint of every
output and of every input after its call, computed with that key. The judge stops its clock
when every rank has answered, so an output must exist, whole, when the clock stops: work deferred to
a finalizer, a thread or an unfinished asynchronous collective is either timed or leaves a
fingerprint that the output revealed later does not match. The outputs stay on the rank until the
judge has picked which of them to reveal (`reveal`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from mgbench.validation.eval import guard, rankchecks
from mgbench.validation.eval.judge import wire


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def materialize(encoded: list[Any], device: torch.device) -> list[tuple]:
    sets = [wire.decode(s, device) for s in encoded]
    if any(type(s) is not tuple for s in sets):
        raise wire.WireError("an input set is not a tuple")
    return sets


def run(
    call: Callable[[tuple], Any],
    sets: list[tuple],
    device: torch.device,
    check: Callable[[list[Any]], str] | None = None,
) -> tuple[list[Any], dict[str, Any]]:
    """k calls back to back, then the checks (`check(outputs)`: "" or a rejection, before any tensor
    operation on the outputs) and the fingerprints; returns (outputs, reply without digests)."""
    events = None
    if device.type == "cuda":
        events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        events[0].record()
    t0 = time.perf_counter()
    outs = [call(args) for args in sets]
    if events is not None:
        events[1].record()
    _sync(device)
    if dist.is_initialized() and dist.get_backend() == "gloo":
        dist.barrier()  # gloo's barrier waits for every collective issued before it (async_op=True left unwaited)
    host_ms = (time.perf_counter() - t0) * 1e3
    reason = check(outs) if check is not None else ""
    reply: dict[str, Any] = {"reason": reason, "rank_ms": host_ms}
    if events is not None:
        reply["device_ms"] = events[0].elapsed_time(events[1])
    return outs, reply


def plain_check(outs: list[Any], device: torch.device) -> str:
    """Both sides run it (the same cost): global hooks a call left behind are cleared and named, and
    every output must be a plain tensor tree before any tensor operation touches it."""
    left = guard.left_behind()
    if left:
        return rankchecks.rule("dispatch_override", f"a timed call left {', '.join(left)} installed")
    for j, o in enumerate(outs):
        why = rankchecks.plain_outputs(o, device)
        if why:
            return f"timed call {j + 1} of the batch: {why}"
    return ""


def fingerprints(outs: list[Any], sets: list[tuple], key: int) -> dict[str, Any]:
    return {
        "out_digests": [wire.digest_tree(o, key) for o in outs],
        "in_digests": [wire.digest_tree(s, key) for s in sets],
        "metas": [wire.meta(o) for o in outs],
    }


def reveal(outs: list[Any], which: list[int]) -> list[Any]:
    """The encoded outputs of the calls the judge picked."""
    return [wire.encode(outs[i]) for i in which]
