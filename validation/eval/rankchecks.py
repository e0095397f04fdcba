"""Per-rank checks of one candidate call: plain outputs, layout, aliasing, mutation, readiness, values.

Pure tensor functions (no process group); each returns "" when the check passes, else a reason that
ends with "(rule <name>)", the rule's name in RULES.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from mgbench.validation.checks import same_tensor, tensors_of
from mgbench.validation.compare import Tolerance, compare, excess, leaves

LAYOUT_ONLY = Tolerance(0.0, math.inf)

# Runtime rules of `mgbench eval` (the static rules live in static.py): name -> what it rejects.
RULES = {
    "plain_output": "every output leaf is exactly torch.Tensor (no subclass, tensor-like object, instance "
    "attribute shadowing a Tensor method), in plain tuple/list/dict containers",
    "output_device": "outputs live on the task's device, strided, with their own storage",
    "layout": "output structure, dtype and shape are the reference's",
    "aliases_input": "no output shares memory with an input",
    "self_alias": "no two outputs overlap in memory",
    "reused_buffer": "no output shares memory with the previous call's output",
    "late_write": "the previous call's output is not modified afterwards",
    "mutated_input": "inputs are not modified",
    "nonfinite": "no NaN or inf where the expected output is finite",
    "values": "values match the expected output within the task's tolerance",
    "rewritten_inputs": "called again on the same input tensors with new values written in place (object, "
    "address and version unchanged, as a kernel refills a caller's buffer), the output follows the new values",
    "heldout_shape": "the solution runs and is right at a held-out shape of the task's shape space, drawn "
    "fresh at each evaluation and never printed",
    "side_stream": "the output is complete when solution() returns (no unsynchronized stream or thread)",
    "timed_values": "the outputs of timed calls picked by the judge match the reference on the same inputs",
    "timed_commit": "a timed call's output revealed after the clock stopped is the one fingerprinted when it stopped",
    "timed_inputs": "a timed call leaves its inputs as the judge sent them",
    "protocol": "replies from the candidate's ranks are plain data in the judge's format",
    "interference": "candidate processes leave the reference's processes (scheduling, priority) alone",
    "monkeypatch": "functions the harness relies on are not replaced",
    "dispatch_override": "no torch function/dispatch mode left active, no dispatcher kernel replaced",
    "reference_call": "candidate code does not call the reference task's functions",
    "introspection": "candidate code does not walk frames, the garbage collector or set trace hooks",
}
PLAIN_CONTAINERS = (tuple, list, dict)
PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


def rule(name: str, message: str) -> str:
    """A rejection reason naming its rule."""
    assert name in RULES, name
    return f"{message} (rule {name})"


_WRAPPER_KEYS = tuple(k for k in ("Python", "Functionalize", "PythonTLSSnapshot") if hasattr(torch._C.DispatchKey, k))


def plain_outputs(out: Any, device: torch.device, path: str = "out") -> str:
    """Reason if any output is not a plain, materialized tensor on `device`. Reads type() first
    and touches a tensor only once its type is exactly torch.Tensor (or Parameter), so no candidate
    override runs; call after guard.left_behind() cleared any mode."""
    kind = type(out)
    if kind in PLAIN_CONTAINERS:
        items = out.items() if kind is dict else enumerate(out)
        for k, v in items:
            why = plain_outputs(v, device, f"{path}[{k!r}]" if kind is dict else f"{path}[{k}]")
            if why:
                return why
        return ""
    if kind in (int, float, bool, complex, str, type(None)):
        return ""
    if kind not in PLAIN_TENSORS:
        name = type.__dict__["__qualname__"].__get__(kind)
        what = "a torch.Tensor subclass" if issubclass(kind, torch.Tensor) else "not a torch.Tensor"
        return rule(
            "plain_output", f"{path} is a {name} ({what}); outputs must be plain, materialized torch.Tensor objects"
        )
    shadow = sorted(k for k in out.__dict__ if hasattr(torch.Tensor, k))
    if shadow:
        return rule("plain_output", f"{path} has instance attributes shadowing Tensor members: {', '.join(shadow[:3])}")
    keys = torch._C._dispatch_keys(out)
    wrapped = [k for k in _WRAPPER_KEYS if keys.has(getattr(torch._C.DispatchKey, k))]
    if wrapped or out.is_nested:
        return rule(
            "plain_output", f"{path} is a wrapper tensor ({', '.join(wrapped) or 'nested'}), not a materialized one"
        )
    if out.layout != torch.strided:
        return rule("output_device", f"{path} has layout {out.layout}, not strided")
    dev = out.device
    if dev.type != device.type or (device.index is not None and dev.index != device.index):
        return rule("output_device", f"{path} is on {dev}, the task runs on {device}")
    return ""


def nonfinite(out: Any, expected: Any) -> str:
    """Reason naming NaN/inf counts where the expected output is finite."""
    for (path, a), (_, e) in zip(leaves(out), leaves(expected)):
        if (
            isinstance(a, torch.Tensor)
            and isinstance(e, torch.Tensor)
            and (a.is_floating_point() or a.is_complex())
            and a.shape == e.shape
            and a.numel()
        ):
            if a.element_size() == 1:  # float8: isfinite is not implemented for it; float32 holds every value
                a, e = a.float(), e.float()
            bad = ~torch.isfinite(a)
            if bool(bad.any()) and bool(torch.isfinite(e.to(a.device)[bad]).all()):
                nan = int(torch.isnan(a).sum())
                return rule(
                    "nonfinite",
                    f"{path} has {nan} NaN and {int(bad.sum()) - nan} inf value(s) of "
                    f"{a.numel()} where the expected output is finite",
                )
    return ""


def same_bits(before: Any, after: Any) -> bool:
    """Like mgbench.validation.checks.unchanged, but NaN equals NaN (a NaN output is not 'changed')."""
    a, b = tensors_of(before), tensors_of(after)
    return len(a) == len(b) and all(
        x.shape == y.shape
        and (
            torch.equal(x, y)
            if not (x.is_floating_point() or x.is_complex())
            else bool(torch.isclose(x, y, rtol=0, atol=0, equal_nan=True).all())
        )
        for x, y in zip(a, b)
    )


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


def aliasing(out: Any, others: Any, what: str, kind: str = "aliases_input") -> str:
    """Reason if any output tensor shares storage with a tensor of `others` (`kind`: the rule)."""
    spans = [(i, _span(t)) for i, t in enumerate(tensors_of(others))]
    for path, o in leaves(out):
        if not isinstance(o, torch.Tensor):
            continue
        so = _span(o)
        for i, si in spans:
            if _overlaps(so, si):
                return rule(kind, f"{path} shares memory with {what.format(i=i)}")
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
                    return rule("self_alias", f"{path} shares memory with {p}")
            seen.append((path, so))
    return ""


def mutated(before: Any, after: Any) -> str:
    """Reason if any input tensor changed (index of the first)."""
    for i, (x, y) in enumerate(zip(tensors_of(before), tensors_of(after))):
        if x.shape != y.shape or x.dtype != y.dtype or not same_tensor(x, y.to(x.device)):
            return rule("mutated_input", f"input {i} was modified")
    return ""


def layout(out: Any, reference: Any) -> str:
    """Reason if structure, dtype, shape (or integer values) differ from the reference output."""
    ok, why = compare(out, reference, LAYOUT_ONLY, exact_dtype=True)
    return "" if ok else rule("layout", f"wrong output: {why}")


def max_excess(actual: Any, expected: Any, rtol: float) -> float:
    """Largest error (in units of compare.error_scale, beyond rtol) over float leaves; inf on NaN."""
    worst = 0.0
    for (_, a), (_, e) in zip(leaves(actual), leaves(expected)):
        if (
            isinstance(a, torch.Tensor)
            and isinstance(e, torch.Tensor)
            and (a.is_floating_point() or a.is_complex())
            and a.shape == e.shape
        ):
            worst = max(worst, excess(a, e, rtol))
    return worst


def values(snap: Any, now: Any, expected: Any, tol: Tolerance, exact_dtype: bool) -> str:
    """Reason if the output (as seen right when solution() returned) is wrong."""
    ok, why = compare(snap, expected, tol, exact_dtype=exact_dtype)
    if ok:
        return ""
    if not same_bits(snap, now):
        return rule(
            "side_stream",
            "output changed after solution() returned: work on a side stream or "
            f"thread was not finished/synchronized when it returned ({why})",
        )
    return rule("values", f"wrong output: {why}")
