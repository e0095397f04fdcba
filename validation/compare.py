"""Compare outputs per rank, recursively: exact structure, dtype and shape; floats within tolerance.

A float leaf passes when |actual - expected| <= atol + rtol * |expected| elementwise, with
atol = atol_rel * scale, the scale being the rms of the element's row (last dimension) and never less
than rms(expected) (error_scale): tolerances are scale-free so they transfer across sizes and seeds.
Integer and bool leaves must match exactly; complex leaves compare as complex; NaN never passes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch

# Per-dtype relative tolerance, and the floor of atol_rel; calibration may raise atol_rel.
RTOL = {
    "bfloat16": 1.6e-2,
    "float16": 1e-3,
    "float32": 1.3e-5,
    "float64": 1e-7,
    "complex64": 1.3e-5,
    "complex128": 1e-7,
    "float8_e4m3fn": 1.25e-1,
    "float8_e5m2": 2.5e-1,
}
ATOL_REL_FLOOR = {
    "bfloat16": 1e-2,
    "float16": 1e-3,
    "float32": 1e-5,
    "float64": 1e-9,
    "complex64": 1e-5,
    "complex128": 1e-9,
    "float8_e4m3fn": 1e-1,
    "float8_e5m2": 2e-1,
}
# A reference needing atol_rel above this against its oracle is wrong, not imprecise; it also
# guarantees that an all-zero answer fails (max |expected| >= rms(expected) > ATOL_REL_MAX * rms).
ATOL_REL_MAX = 0.1
# The most a reference's error against its float64 oracle may be, per output dtype, once doubled by
# MARGIN_MIN: past it the reference is wrong, not imprecise, and its error must never calibrate into
# the published tolerance (a float32 reference 1.6% off is a bug that ATOL_REL_MAX alone would let
# through). Set a few times above the largest error measured on CPU (smoke) and CUDA (full) for
# correct references of that dtype; a dtype not listed gets ATOL_REL_MAX.
CALIBRATION_CEILING = {
    "float64": 1e-6,
    "complex128": 1e-6,
    "float32": 1e-2,
    "complex64": 1e-2,
    "float16": 5e-2,
    "bfloat16": ATOL_REL_MAX,
}
SAFETY = 4.0
# The reference must sit at least this far inside the capped tolerance: worst * MARGIN_MIN <= ATOL_REL_MAX
# (so the published tolerance is between MARGIN_MIN and SAFETY times the reference's own error).
MARGIN_MIN = 2.0


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol_rel: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def calibration_ceiling(dtype: str) -> float:
    """The widest atol_rel a reference of this dtype may calibrate (see CALIBRATION_CEILING)."""
    return min(ATOL_REL_MAX, CALIBRATION_CEILING.get(dtype, ATOL_REL_MAX))


def ceiling_of_dtypes(names: Any) -> float:
    """The calibration ceiling of a computation touching tensors of these dtype names: that of the least
    precise floating one (a float32 loss computed from bfloat16 activations carries bfloat16 error)."""
    floats = {n for n in names if n.startswith(("float", "bfloat", "complex"))}
    return max((calibration_ceiling(d) for d in floats), default=ATOL_REL_MAX)


def computation_ceiling(*trees: Any) -> float:
    """ceiling_of_dtypes of the tensors of `trees` (a computation's inputs and outputs)."""
    return ceiling_of_dtypes(dtype_name(t) for tree in trees for _, t in leaves(tree) if _is_float(t))


def _is_float(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


def default_tolerance(dtype: str) -> Tolerance:
    return Tolerance(RTOL.get(dtype, 0.0), ATOL_REL_FLOOR.get(dtype, 0.0))


def leaves(obj: Any, path: str = "out") -> list[tuple[str, Any]]:
    """Flatten tensors/scalars in nested tuples, lists and dicts (dict keys sorted) with their paths."""
    if isinstance(obj, (tuple, list)):
        return [x for i, v in enumerate(obj) for x in leaves(v, f"{path}[{i}]")]
    if isinstance(obj, dict):
        return [x for k in sorted(obj, key=str) for x in leaves(obj[k], f"{path}[{k!r}]")]
    return [(path, obj)]


def map_tree(obj: Any, fn, leaf: type | tuple[type, ...] = torch.Tensor) -> Any:
    """`obj` with `fn` applied to each of its `leaf` objects (tensors by default), in tuples, lists and dicts
    (dicts in their own order); anything else is kept as it is."""
    if isinstance(obj, leaf):
        return fn(obj)
    if isinstance(obj, (tuple, list)):
        return type(obj)(map_tree(v, fn, leaf) for v in obj)
    if isinstance(obj, dict):
        return {k: map_tree(v, fn, leaf) for k, v in obj.items()}
    return obj


def _structure(obj: Any) -> Any:
    if isinstance(obj, (tuple, list)):
        return (type(obj).__name__, tuple(_structure(v) for v in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((str(k), _structure(obj[k])) for k in sorted(obj, key=str)))
    return "leaf"


def _rms(e: torch.Tensor) -> float:
    if e.numel() == 0:
        return 0.0
    return float(e.abs().double().pow(2).mean().sqrt()) if e.is_complex() else float(e.double().pow(2).mean().sqrt())


def error_scale(expected: torch.Tensor) -> torch.Tensor | float:
    """What an element's error is measured in: the rms of its row (the last dimension), never less than the
    rms of the whole leaf. A row of large values (the first queries of a causal attention, which attend to
    a few keys, are tens of times the output's rms at full size) carries rounding errors in proportion to
    its own values, also where a result cancels to something small; the leaf's rms alone would count them
    as wrong. A vector, a scalar or rows of one element: the leaf's rms. At a given atol_rel nothing is
    judged more strictly than against the leaf's rms alone; a tolerance calibrated from a reference's error
    in these units may be smaller than one calibrated against the leaf's rms."""
    rms = _rms(expected)
    if expected.dim() < 2 or expected.shape[-1] < 2 or rms == 0:
        return rms
    rows = torch.linalg.vector_norm(expected, dim=-1, keepdim=True).div_(math.sqrt(expected.shape[-1]))
    return rows.clamp_(min=rms)


# Leaves of more elements than this are measured in chunks of rows (excess_in_rows): the float64 copies and
# temporaries of a whole 2^28-element leaf (about 5 of 2 GiB each) were what several ranks sharing one GPU
# could not hold at full size. Smaller leaves, every leaf of the CPU build among them, take the one-piece path.
CHUNK_ELEMENTS = 1 << 25


def excess(actual: torch.Tensor, expected: torch.Tensor, rtol: float) -> float:
    """Smallest atol_rel under which `actual` passes against `expected` (inf if NaN/inf appear): the largest
    elementwise error beyond rtol * |expected|, in units of the element's error_scale."""
    if actual.numel() == 0:
        return 0.0
    wide = torch.complex128 if expected.is_complex() or actual.is_complex() else torch.float64
    dev = expected.device if expected.is_cuda else "cpu"  # full-size GPU outputs stay on the GPU
    if actual.shape == expected.shape and expected.numel() > CHUNK_ELEMENTS:
        return excess_in_rows(actual, expected, rtol, wide, dev)
    a, e = actual.detach().to(dev, wide), expected.detach().to(dev, wide)
    if not bool(torch.isfinite(a).all()) or not bool(torch.isfinite(e).all()):
        return math.inf
    over = (a - e).abs() - rtol * e.abs()
    worst = float(over.max())
    if worst <= 0:
        return 0.0
    scale = error_scale(e)
    if isinstance(scale, float):
        return worst / scale if scale > 0 else math.inf
    return float(over.div_(scale).max())


def excess_in_rows(actual: torch.Tensor, expected: torch.Tensor, rtol: float, wide: torch.dtype, dev: Any) -> float:
    """excess() over chunks of rows (of the last dimension; of single elements for a vector), holding about
    CHUNK_ELEMENTS float64 elements at a time besides the leaf's rms. Maxima and elementwise operations are
    exact in any grouping; each row's rms is over that row alone, and the leaf's rms is error_scale's."""
    a0, e0 = actual.detach(), expected.detach()
    by_rows = e0.dim() >= 2 and e0.shape[-1] >= 2
    width = e0.shape[-1] if by_rows else 1
    a2, e2 = a0.reshape(-1, width), e0.reshape(-1, width)
    step = max(1, CHUNK_ELEMENTS // width)

    def chunks() -> Any:
        for i in range(0, e2.shape[0], step):
            yield a2[i : i + step].to(dev, wide), e2[i : i + step].to(dev, wide)

    worst = -math.inf
    for a, e in chunks():
        if not bool(torch.isfinite(a).all()) or not bool(torch.isfinite(e).all()):
            return math.inf
        worst = max(worst, float(((a - e).abs_() - rtol * e.abs()).max()))
    if worst <= 0:
        return 0.0
    rms = _rms(e0.to(dev, wide))  # as excess() computes it, from the whole leaf
    if not by_rows or rms == 0:
        return worst / rms if rms > 0 else math.inf
    best = 0.0
    for a, e in chunks():
        over = (a - e).abs_() - rtol * e.abs()
        rows = torch.linalg.vector_norm(e, dim=-1, keepdim=True).div_(math.sqrt(width)).clamp_(min=rms)
        best = max(best, float(over.div_(rows).max()))
    return best


def compare(actual: Any, expected: Any, tol: Tolerance | None = None, exact_dtype: bool = True) -> tuple[bool, str]:
    """(passed, reason). `tol` None means the per-dtype default of each leaf."""
    if _structure(actual) != _structure(expected):
        return False, "output structure differs (tuple/list/dict nesting or length)"
    for (path, a), (_, e) in zip(leaves(actual), leaves(expected)):
        if isinstance(e, torch.Tensor) != isinstance(a, torch.Tensor):
            return False, f"{path}: expected {type(e).__name__}, got {type(a).__name__}"
        if not isinstance(e, torch.Tensor):
            if a != e:
                return False, f"{path}: expected {e!r}, got {a!r}"
            continue
        if tuple(a.shape) != tuple(e.shape):
            return False, f"{path}: shape {tuple(a.shape)} != expected {tuple(e.shape)}"
        if exact_dtype and a.dtype != e.dtype:
            return False, f"{path}: dtype {dtype_name(a)} != expected {dtype_name(e)}"
        if a.is_complex() != e.is_complex():
            return False, f"{path}: complex vs real mismatch"
        if not (a.is_floating_point() or a.is_complex()):
            if e.is_floating_point() and not exact_dtype:
                e = e.to(a.dtype) if bool((e == e.round()).all()) else e
            if not torch.equal(a.cpu(), e.cpu().to(a.dtype)):
                return False, f"{path}: integer/bool values differ"
            continue
        t = tol or default_tolerance(dtype_name(a))
        x = excess(a, e, t.rtol)
        if x > t.atol_rel:
            return False, f"{path}: error {x:.3g} x row rms exceeds atol_rel {t.atol_rel:.3g} (rtol {t.rtol:g})"
    return True, "ok"


def calibrate(actual: Any, expected: Any, dtype: str) -> tuple[Tolerance, float]:
    """Tolerance for a task from the reference's error against its oracle: (tolerance, worst excess)."""
    base = default_tolerance(dtype)
    worst = 0.0
    for (_, a), (_, e) in zip(leaves(actual), leaves(expected)):
        if isinstance(a, torch.Tensor) and (a.is_floating_point() or a.is_complex()):
            worst = max(worst, excess(a, e, base.rtol))
    return Tolerance(base.rtol, max(base.atol_rel, SAFETY * worst)), worst
