"""One timed batch on a rank (reference or candidate side), inside the judge's clock.

The judge sends the batch's first input set (bytes) and a fresh key; the rank makes the call and sends,
as a step of the streamed job, the fingerprints of the call's output and of its inputs after the call,
computed with that key when the call returned; only then does the judge send the next input set (or
the end of the batch). So nothing in the rank knows a later call's inputs, or how many calls the batch
has, before the call before it returned: calls cannot be fused, and an output must be whole when its
call returns (what a caller reading it at once would see), or its fingerprint will not match the output
revealed later. After the last call the rank waits for its device and its pending collectives and
answers; the judge stops its clock when every rank has answered. The outputs stay on the rank until the
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
from mgbench.validation.jobs import is_step_end
from mgbench.validation.worker import RankContext


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def materialize(encoded: Any, device: torch.device) -> tuple:
    """An input set from the judge's bytes."""
    args = wire.decode(encoded, device)
    if type(args) is not tuple:
        raise wire.WireError("an input set is not a tuple")
    return args


def run(
    call: Callable[[tuple], Any],
    first: Any,
    ctx: RankContext,
    key: int,
    check: Callable[[Any], str],
) -> tuple[list[Any], dict[str, Any]]:
    """The batch's calls, one input set at a time (see the module docstring); `check(output)`: "" or a
    rejection, before any tensor operation on the output. Returns (outputs, reply)."""
    device = ctx.device
    events = None
    if device.type == "cuda":
        events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        events[0].record()
    outs: list[Any] = []
    held: list[tuple] = []  # every input set lives until the batch ends, as when a batch came at once: no
    # call's inputs reuse an earlier call's memory (a cache keyed on addresses hits alike on every rank)
    reason = ""
    t0 = time.perf_counter()
    data = first
    while True:
        args = materialize(data, device)
        out = call(args)
        why = check(out)
        step: dict[str, Any] = {"call": len(outs)}
        if why:  # the other ranks' calls go on (they may wait for this rank's collectives); verdict after
            reason = reason or f"timed call {len(outs) + 1} of the batch: {why}"
        else:
            step.update(out=wire.digest_tree(out, key), inputs=wire.digest_tree(args, key), meta=wire.meta(out))
        outs.append(out)
        held.append(args)
        data = ctx.exchange(step)
        if is_step_end(data):
            break
    if events is not None:
        events[1].record()
    _sync(device)
    if dist.is_initialized() and dist.get_backend() == "gloo":
        dist.barrier()  # gloo's barrier waits for every collective issued before it (async_op=True left unwaited)
    reply: dict[str, Any] = {"reason": reason, "rank_ms": (time.perf_counter() - t0) * 1e3}
    if events is not None:
        reply["device_ms"] = events[0].elapsed_time(events[1])
    return outs, reply


def plain_check(out: Any, device: torch.device) -> str:
    """Both sides run it after every call (the same cost): global hooks the call left behind are cleared
    and named, and the output must be a plain tensor tree before any tensor operation touches it."""
    left = guard.left_behind()
    if left:
        return rankchecks.rule("dispatch_override", f"a timed call left {', '.join(left)} installed")
    return rankchecks.plain_outputs(out, device)


def reveal(outs: list[Any], which: list[int]) -> list[Any]:
    """The encoded outputs of the calls the judge picked."""
    return [wire.encode(outs[i]) for i in which]
