"""Candidate side of the judge: job handlers of the candidate's rank processes (fresh for every
candidate). These processes hold nothing the judge relies on: no task module, no oracle, no seed, no
expected output, no tolerance, no clock. They turn the bytes the judge sends into tensors, call
solution(), and send outputs and inputs back as bytes (wire). The guard (harness hidden and
import-blocked, integrity snapshot, audit hook) stays as defence in depth: its findings become
rejections, but no verdict depends on it.

Jobs: judge_cand_setup (hide the harness, install the guard, import the candidate file),
judge_cand_call (one correctness call: outputs as returned and after the device is idle, the inputs
after the call, the previous call's output again; on the judge's request the call's input tensors are kept,
and a later call's values are written into them in place), judge_cand_batch (a timed batch, rankbatch),
judge_cand_reveal (the full outputs of the timed calls the judge picked, then the integrity checks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from mgbench.validation.compare import map_tree
from mgbench.validation.eval import audit, guard, rankchecks
from mgbench.validation.eval.guard import CandidateError
from mgbench.validation.eval.judge import rankbatch, wire
from mgbench.validation.jobs import JudgeCandBatchJob, JudgeCandCallJob, JudgeCandRevealJob, JudgeCandSetupJob
from mgbench.validation.worker import RankContext, register


@dataclass
class _State:
    solution: Callable
    filename: str
    integrity: guard.Integrity
    audit: audit.AuditLog
    prev: Any = None  # the previous correctness call's output (its late writes are checked)
    kept: Any = None  # the input tensors of the call the judge asked to keep (JudgeCandCallJob.keep_inputs)
    kept_layout: list[Any] = field(default_factory=list)  # their storages and shapes then (_layout)
    outs: list[Any] = field(default_factory=list)  # the last timed batch's outputs, until revealed
    threads: set[int] = field(default_factory=set)


_STATE: list[_State] = []


def _st() -> _State:
    if not _STATE:
        raise RuntimeError("judge_cand_setup must run first")
    return _STATE[0]


def integrity_reason(st: _State, when: str, left: list[str] | None = None) -> str:
    """Defence in depth: reflection, hooks left installed, dispatcher kernels or harness functions replaced."""
    if st.audit.refused:
        return rankchecks.rule("introspection", f"{when}: {st.audit.reason()}")
    if left:
        return rankchecks.rule(
            "dispatch_override",
            f"{when}: solution() left {', '.join(left)} installed (it would run inside the harness's code)",
        )
    ops = st.integrity.dispatch_violations()
    if ops:
        return rankchecks.rule(
            "dispatch_override", f"{when}: candidate code registered kernels over {', '.join(ops[:3])}"
        )
    bad = st.integrity.violations()
    if bad:
        more = f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""
        return rankchecks.rule(
            "monkeypatch", f"{when}: candidate code replaced {', '.join(bad[:3])}{more} (monkeypatching the harness)"
        )
    return ""


def _setup(job: JudgeCandSetupJob, ctx: RankContext) -> dict[str, Any]:
    hidden, blocker = guard.hide_harness()
    integrity = guard.Integrity({f"harness:{k}": m for k, m in hidden.items()}, blocker)
    filename = job.filename
    log = audit.install(filename)  # from here on, frame and gc walks from candidate code fail
    mod = guard.candidate_call(
        guard.load_source, (job.cand_source, filename, True), "importing the solution file", filename, log.refused
    )
    left = guard.left_behind()
    fn = getattr(mod, "solution", None)
    if not callable(fn):
        raise CandidateError("the solution file defines no callable solution(...)")
    _STATE[:] = [_State(fn, filename, integrity, log, threads=guard.thread_idents())]
    return {"reason": integrity_reason(_STATE[0], "at import", left), "flags": []}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _host_copy(value: Any) -> Any:
    """A CUDA tensor's values in host memory, copied on the current stream with no device allocation.

    A device allocation here (a clone, or the contiguous staging copy that `.cpu()` makes of a tensor with
    gaps or repeats) could reuse a block the candidate freed on this stream while its side stream still
    reads it, and would then overwrite what that stream copies later. Seen on an H100 (pass 12):
    side_stream_last_copy judged "wrong output", error 5.56 x the row rms (what an all-zero output gives),
    where the side-stream rule should name it. So a non-dense tensor is copied as the one dense span of
    memory it covers, and its view is taken on the host."""
    if type(value) not in (torch.Tensor, torch.nn.Parameter) or value.layout != torch.strided:
        return value  # the encoder takes or refuses it as before
    t = value.detach()
    if t.numel() == 0 or t.is_contiguous() or t.is_conj() or t.is_neg():
        return t.cpu()
    span = 1 + sum((n - 1) * step for n, step in zip(t.shape, t.stride()))
    dense = t.as_strided((span,), (1,), t.storage_offset()).cpu()
    return dense.as_strided(t.shape, t.stride()).contiguous()


def _layout(leaves: list[Any]) -> list[Any]:
    """What each leaf of a kept input set must still be when the judge rewrites it: for a plain strided tensor
    its storage's address and size, offset, shape, stride, dtype and device; for anything else its type."""
    out: list[Any] = []
    for t in leaves:
        if type(t) is torch.Tensor and t.layout == torch.strided:
            store = t.untyped_storage()
            out.append((store.data_ptr(), store.nbytes(), t.storage_offset(), t.shape, t.stride(), t.dtype, t.device))
        else:
            out.append(type(t))
    return out


def _writable(old: Any, new: Any) -> bool:
    """Whether host tensor `new`'s values can be copied into kept tensor `old` as they are: both plain strided
    tensors of one shape, dtype and stride (a Parameter never: the wire decodes plain tensors only)."""
    return (
        type(old) is torch.Tensor
        and type(new) is torch.Tensor
        and old.layout == new.layout == torch.strided
        and (old.shape, old.dtype, old.stride()) == (new.shape, new.dtype, new.stride())
    )


KEPT_CHANGED = (
    "the input tensors of an earlier call were changed after it returned (storage resized or replaced, or "
    "restrided) before the judge wrote its next inputs into them"
)


def rewrite_into(kept: Any, layout: list[Any], host: Any, device: torch.device) -> tuple[Any, int, str]:
    """(the inputs to call with, how many tensors were rewritten, a rejection or ""): the kept input tensors
    holding host tree `host`'s values, written in place through `.data`, so each keeps its object, address and
    version counter, as when a kernel or a collective refills a caller's buffer for its next step; other leaves
    (scalars, sparse tensors) are `host`'s, moved to `device`. None (decode afresh) where nothing was kept or
    the structure differs; None and a mutated_input rejection where the kept tensors no longer have the
    `layout` they had when kept (writing into a storage the candidate resized would write out of bounds)."""
    if kept is None:
        return None, 0, ""
    old_leaves, old_spec = torch.utils._pytree.tree_flatten(kept)
    if _layout(old_leaves) != layout:
        return None, 0, rankchecks.rule("mutated_input", KEPT_CHANGED)
    new_leaves, new_spec = torch.utils._pytree.tree_flatten(host)
    if old_spec != new_spec:
        return None, 0, ""
    leaves, rewritten = [], 0
    with torch.no_grad():
        for old, new in zip(old_leaves, new_leaves):
            if _writable(old, new):
                old.data.copy_(new)  # host to device, one input set on the device at a time
                leaves.append(old)
                rewritten += 1
            else:
                leaves.append(new.to(device) if isinstance(new, torch.Tensor) else new)
    return torch.utils._pytree.tree_unflatten(leaves, old_spec), rewritten, ""


def _inputs_for(job: JudgeCandCallJob, st: _State, device: torch.device) -> tuple[Any, int, str]:
    """(inputs, tensors rewritten in place, a rejection or "") of a correctness call; keeps them if asked."""
    inputs, rewritten, kept_changed = None, 0, ""
    if job.rewrite_inputs:  # the judge's provocation of caches keyed on the input objects (docs/eval.md)
        if st.kept is not None:  # else nothing to rewrite: decoded once, on the device, below
            inputs, rewritten, kept_changed = rewrite_into(st.kept, st.kept_layout, wire.decode(job.inputs), device)
        st.kept, st.kept_layout = None, []
    if inputs is None:
        inputs = wire.decode(job.inputs, device)
    if job.keep_inputs:
        st.kept, st.kept_layout = inputs, _layout(torch.utils._pytree.tree_flatten(inputs)[0])
    return inputs, rewritten, kept_changed


def _call(job: JudgeCandCallJob, ctx: RankContext) -> dict[str, Any]:
    st = _st()
    inputs, rewritten, kept_changed = _inputs_for(job, st, ctx.device)
    threads = guard.thread_idents()
    _sync(ctx.device)
    caller = torch.cuda.current_stream(ctx.device) if ctx.device.type == "cuda" else None
    out = guard.candidate_call(st.solution, inputs, "solution()", st.filename, st.audit.refused)
    left = guard.left_behind()  # before any harness tensor operation
    if caller is not None:
        torch.cuda.set_stream(caller)  # a candidate that switched streams does not choose the snapshot's
    plain = rankchecks.plain_outputs(out, ctx.device)
    snap = None
    if not plain:  # what a consumer on the caller's stream sees right when solution() returned
        snap = wire.encode(out if caller is None else map_tree(out, _host_copy))
    _sync(ctx.device)
    threads_left = guard.candidate_threads(threads)
    reason = (
        integrity_reason(st, "during solution()", left)
        or kept_changed
        or plain
        or rankchecks.aliasing(out, inputs, "input {i}")
        or rankchecks.self_aliasing(out)
        or (
            rankchecks.aliasing(out, st.prev, "the output of the previous call (a reused buffer)", "reused_buffer")
            if st.prev is not None
            else ""
        )
    )
    final = wire.encode(out) if not plain else None
    reply = {
        "reason": reason,
        "flags": (
            [f"solution() left {len(threads_left)} thread(s) running after it returned: {', '.join(threads_left[:3])}"]
            if threads_left
            else []
        ),
        "output": snap,
        "output_after": final if final != snap else None,  # only when it changed after returning
        "inputs_after": wire.encode(inputs),
        "previous_after": wire.encode(st.prev) if st.prev is not None else None,
        "rewritten": rewritten,
    }
    st.prev = out if not plain else None
    return reply


def _batch(job: JudgeCandBatchJob, ctx: RankContext) -> dict[str, Any]:
    st = _st()
    st.outs = []

    def call(args: tuple) -> Any:
        return guard.candidate_call(st.solution, args, "solution() while timed", st.filename, st.audit.refused)

    outs, reply = rankbatch.run(call, job.first, ctx, job.key, lambda o: rankbatch.plain_check(o, ctx.device))
    st.outs = outs if not reply["reason"] else []
    return reply


def _reveal(job: JudgeCandRevealJob, ctx: RankContext) -> dict[str, Any]:
    st = _st()
    outs, st.outs = st.outs, []
    revealed = rankbatch.reveal(outs, job.which)
    del outs
    left = guard.left_behind()
    threads_left = guard.candidate_threads(st.threads)
    return {
        "outputs": revealed,
        "reason": integrity_reason(st, "while timed", left),
        "flags": (
            [f"{len(threads_left)} thread(s) of candidate code running while timed: {', '.join(threads_left[:3])}"]
            if threads_left
            else []
        ),
    }


register(JudgeCandSetupJob, _setup)
register(JudgeCandCallJob, _call)
register(JudgeCandBatchJob, _batch)
register(JudgeCandRevealJob, _reveal)
