"""Comparisons, in the judge only: tolerances calibrated from the clean reference run, the declared
output contract (structure, dtype, shape of the reference's outputs), and the checks of one
correctness call and of the revealed timed calls against the judge's own expected outputs.

Every function takes data the judge holds (decoded from bytes) and returns "" or a rejection reason
naming its rule (rankchecks.RULES).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mgbench.validation.checks import tensors_of
from mgbench.validation.compare import (
    ATOL_REL_MAX,
    Tolerance,
    calibrate,
    ceiling_of_dtypes,
    compare,
    default_tolerance,
    dtype_name,
)
from mgbench.validation.eval import rankchecks
from mgbench.validation.eval.judge import wire

TIMED_TOL_FACTOR = 2.0  # a timed call vs the reference: each may be off the oracle by the tolerance


def float_dtype(out: Any) -> str:
    floats = [t for t in tensors_of(out) if t.is_floating_point() or t.is_complex()]
    return dtype_name(floats[0]) if floats else "float32"


def tolerance(
    recorded: dict[str, float] | None,
    references: list[Any],
    expected: list[Any],
    has_oracle: bool,
    input_dtypes: Sequence[str] = (),
) -> Tolerance:
    """The trial's tolerance: the task's recorded one (else the dtype's default), widened to the
    reference's own error against the oracle on these inputs (max over ranks), capped at the ceiling of
    the computation's least precise float dtype (its inputs' `input_dtypes` and its outputs')."""
    rec = recorded or {}
    base = default_tolerance(float_dtype(references[0]))
    rtol = rec.get("rtol") if rec.get("rtol") is not None else base.rtol
    atol = rec.get("atol_rel") if rec.get("atol_rel") is not None else base.atol_rel
    if has_oracle:
        worst = max(calibrate(r, e, float_dtype(r))[0].atol_rel for r, e in zip(references, expected))
        out_dtypes = [dtype_name(t) for r in references for t in tensors_of(r)]
        atol = min(max(atol, worst), ceiling_of_dtypes([*input_dtypes, *out_dtypes]))
    return Tolerance(rtol, atol)


def widened(tol: Tolerance) -> Tolerance:
    return Tolerance(tol.rtol * TIMED_TOL_FACTOR, min(tol.atol_rel * TIMED_TOL_FACTOR, ATOL_REL_MAX))


def dtypes_of_meta(meta: Any) -> list[str]:
    """The tensor dtype names of a wire.meta() tree."""
    if "t" in meta:
        return [meta["t"]]
    ((kind, val),) = meta.items()
    if kind in ("tuple", "list"):
        return [d for v in val for d in dtypes_of_meta(v)]
    if kind == "dict":
        return [d for _, v in val for d in dtypes_of_meta(v)]
    return []


def declared(reference: Any) -> Any:
    """The output contract recorded from the clean reference run: structure, dtypes, shapes."""
    return wire.meta(reference)


def _decode(data: Any, what: str) -> tuple[Any, str]:
    try:
        return wire.decode(data), ""
    except (wire.WireError, TypeError, AttributeError, KeyError, ValueError) as e:
        return None, rankchecks.rule("protocol", f"{what} did not come back in the judge's format ({e})")


def check_call(
    reply: dict[str, Any],
    sent_inputs: Any,
    reference: Any,
    expected: Any,
    tol: Tolerance,
    exact_dtype: bool,
    previous: Any,
    stale: Any = None,
) -> tuple[str, Any, float | None]:
    """(reason, the output as returned, max error) of one correctness call on one rank. `stale`: the expected
    output of the values the input tensors held before the judge rewrote them in place; a wrong output that
    is that one is rejected under rewritten_inputs."""
    if reply.get("reason"):
        return str(reply["reason"]), None, None
    out, why = _decode(reply.get("output"), "the output")
    if why:
        return why, None, None
    why = rankchecks.layout(out, reference)
    if why:
        return why, out, None
    after, why = _decode(reply.get("inputs_after"), "the inputs")
    if why:
        return why, out, None
    why = rankchecks.mutated(wire.decode(sent_inputs), after)
    if why:
        return why, out, None
    if previous is not None:
        prev_after, why = _decode(reply.get("previous_after"), "the previous output")
        if why:
            return why, out, None
        if type(prev_after) is not type(previous) or not rankchecks.same_bits(previous, prev_after):
            return (
                rankchecks.rule(
                    "late_write",
                    "the output returned by the previous call was modified afterwards (returned a reused or "
                    "shared buffer, or work continued after returning)",
                ),
                out,
                None,
            )
    why = rankchecks.nonfinite(out, expected)
    if why:
        return why, out, None
    ok, how = compare(out, expected, tol, exact_dtype=exact_dtype)
    if not ok:
        if reply.get("output_after") is not None:
            return (
                rankchecks.rule(
                    "side_stream",
                    "output changed after solution() returned: work on a side stream or thread was not "
                    f"finished/synchronized when it returned ({how})",
                ),
                out,
                None,
            )
        if stale is not None and compare(out, stale, tol, exact_dtype=exact_dtype)[0]:
            return (
                rankchecks.rule(
                    "rewritten_inputs",
                    f"wrong output: the answer for the values its input tensors held before the judge wrote new "
                    f"ones into them ({how})",
                ),
                out,
                None,
            )
        return rankchecks.rule("values", f"wrong output: {how}"), out, None
    return "", out, rankchecks.max_excess(out, expected, tol.rtol)


def check_timed(revealed: Any, expected: Any, tol: Tolerance, call: int) -> str:
    """A revealed timed output against the reference's output on the same inputs (from the clean ranks)."""
    out, why = _decode(revealed, f"timed call {call}'s output")
    if why:
        return why
    ok, how = compare(out, expected, tol, exact_dtype=True)
    if ok:
        return ""
    return rankchecks.rule(
        "timed_values",
        f"timed call {call}: output differs from the reference run on the same inputs ({how}); a cache, a "
        "shortcut taken only when timed, or work left unfinished",
    )


def check_commit(revealed: Any, committed: Any, key: int, device_type: str, call: int) -> str:
    """The revealed output must be the bytes fingerprinted when its call returned."""
    try:
        now = wire.digest_data(revealed, key, device_type)
    except (wire.WireError, TypeError, AttributeError, KeyError, ValueError) as e:
        return rankchecks.rule("protocol", f"timed call {call}'s output did not come back in the judge's format ({e})")
    if now != committed:
        return rankchecks.rule(
            "timed_commit",
            f"timed call {call}: the output revealed after the batch is not the one fingerprinted when the call "
            "returned (work finished after the call returned: a thread, finalizer, side stream or unfinished "
            "asynchronous collective, or a buffer written later)",
        )
    return ""


def check_layout(meta: Any, contract: Any, call: int) -> str:
    if meta == contract:
        return ""
    return rankchecks.rule(
        "layout", f"wrong output: timed call {call} returned {meta!r:.160}, the task declares {contract!r:.160}"
    )
