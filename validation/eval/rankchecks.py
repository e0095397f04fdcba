"""Per-rank checks of one candidate call: layout, aliasing, mutation, readiness, values.

Pure tensor functions (no process group); each returns "" when the check passes, else a reason.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from validation.checks import tensors_of, unchanged
from validation.compare import Tolerance, compare, excess, leaves

LAYOUT_ONLY = Tolerance(0.0, math.inf)


def _span(t: torch.Tensor) -> tuple[str, int, int] | None:
    """(device, first byte, end byte) of the storage behind `t`, None for empty tensors."""
    if t.numel() == 0:
        return None
    try:
        s = t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None
    return str(t.device), s.data_ptr(), s.data_ptr() + max(s.nbytes(), 1)


def _overlaps(a: tuple[str, int, int] | None, b: tuple[str, int, int] | None) -> bool:
    return a is not None and b is not None and a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def aliasing(out: Any, others: Any, what: str) -> str:
    """Reason if any output tensor shares storage with a tensor of `others`."""
    spans = [(i, _span(t)) for i, t in enumerate(tensors_of(others))]
    for path, o in leaves(out):
        if not isinstance(o, torch.Tensor):
            continue
        so = _span(o)
        for i, si in spans:
            if _overlaps(so, si):
                return f"{path} shares memory with {what.format(i=i)}"
    return ""


def _view_span(t: torch.Tensor) -> tuple[str, int, int] | None:
    """The bytes a view can touch (disjoint views of one flat buffer do not overlap)."""
    if t.numel() == 0 or t.device.type == "meta":
        return None
    extent = 1 + sum((n - 1) * abs(st) for n, st in zip(t.shape, t.stride()))
    lo = t.data_ptr() - sum((n - 1) * abs(st) for n, st in zip(t.shape, t.stride()) if st < 0) * t.element_size()
    return str(t.device), lo, lo + extent * t.element_size()


def self_aliasing(out: Any) -> str:
    """Reason if two output tensors overlap in memory (one buffer returned twice); disjoint views
    of one buffer (e.g. gradients unflattened from a bucket) are allowed."""
    seen: list[tuple[str, tuple[str, int, int] | None]] = []
    for path, o in leaves(out):
        if isinstance(o, torch.Tensor):
            so = _view_span(o)
            for p, s in seen:
                if _overlaps(so, s):
                    return f"{path} shares memory with {p}"
            seen.append((path, so))
    return ""


def mutated(before: Any, after: Any) -> str:
    """Reason if any input tensor changed (index of the first)."""
    for i, (x, y) in enumerate(zip(tensors_of(before), tensors_of(after))):
        if x.shape != y.shape or x.dtype != y.dtype or not torch.equal(x, y.to(x.device)):
            return f"input {i} was modified"
    return ""


def layout(out: Any, reference: Any) -> str:
    """Reason if structure, dtype, shape (or integer values) differ from the reference output."""
    ok, why = compare(out, reference, LAYOUT_ONLY, exact_dtype=True)
    return "" if ok else f"wrong output: {why}"


def max_excess(actual: Any, expected: Any, rtol: float) -> float:
    """Largest error (in units of rms(expected), beyond rtol) over float leaves; inf on NaN."""
    worst = 0.0
    for (_, a), (_, e) in zip(leaves(actual), leaves(expected)):
        if isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor) and \
                (a.is_floating_point() or a.is_complex()) and a.shape == e.shape:
            worst = max(worst, excess(a, e, rtol))
    return worst


def values(snap: Any, now: Any, expected: Any, tol: Tolerance, exact_dtype: bool) -> str:
    """Reason if the output (as seen right when solution() returned) is wrong."""
    ok, why = compare(snap, expected, tol, exact_dtype=exact_dtype)
    if ok:
        return ""
    if not unchanged(snap, now):
        return ("output changed after solution() returned: work on a side stream or thread was not "
                f"finished/synchronized when it returned ({why})")
    return f"wrong output: {why}"
