"""Stand-in for `numpy` (imported as a whole module) in candidates that use it for scalar arithmetic next to
torch code (`np.sqrt(x.numel())`, `np.prod(shape)`). Added only to the task modules that import numpy, so
other tasks' text does not change. A text part (torch + stdlib only), not imported: it uses the runtime's
`_MgMissing` and `_mg_torch`.

The scalar functions and constants below work on Python numbers, 0-d tensors and flat lists of numbers, and
`np.random.seed` does nothing; anything else (an array, drawing from `np.random`, a tensor with elements)
raises the missing-import error, so a candidate that needs numpy arrays is still rejected as such."""
import math as _mg_math


def _mg_np_scalar(x):
    """A Python number from a number or a one-element tensor, else the missing-import error."""
    if isinstance(x, (bool, int, float)):
        return x
    if hasattr(x, "numel") and x.numel() == 1:
        return x.item()
    raise ImportError("mgbench-missing-import: numpy (an array argument)")


def _mg_np_numbers(xs):
    if isinstance(xs, (list, tuple)) or type(xs).__name__ == "Size":
        return [_mg_np_scalar(x) for x in xs]
    return [_mg_np_scalar(xs)]


def _mg_np_type(name, base, dtype):
    """A numpy scalar type: converting rounds (or wraps) as numpy does, through the torch dtype."""
    def new(cls, x=0):
        return base.__new__(cls, _mg_torch.tensor(_mg_np_scalar(x), dtype=_mg_torch.float64).to(dtype).item())
    return type(name, (base,), {"__new__": new})


class _MgNumpyArray:
    """`np.ndarray` and the abstract scalar types: nothing here is one (no arrays exist without numpy)."""


class _MgNumpy:
    """`numpy` for scalar arithmetic: math functions, reductions of flat lists, dtypes as number types."""
    pi, e, inf, nan = _mg_math.pi, _mg_math.e, _mg_math.inf, _mg_math.nan
    float64 = double = _mg_np_type("float64", float, _mg_torch.float64)
    float32 = single = _mg_np_type("float32", float, _mg_torch.float32)
    float16 = half = _mg_np_type("float16", float, _mg_torch.float16)
    int64 = _mg_np_type("int64", int, _mg_torch.int64)
    int32 = _mg_np_type("int32", int, _mg_torch.int32)
    int16 = _mg_np_type("int16", int, _mg_torch.int16)
    int8 = _mg_np_type("int8", int, _mg_torch.int8)
    uint8 = _mg_np_type("uint8", int, _mg_torch.uint8)
    bool_ = bool
    ndarray = generic = number = integer = floating = _MgNumpyArray

    def __getattr__(self, attr):
        one = {"sqrt": _mg_math.sqrt, "ceil": lambda v: float(_mg_math.ceil(v)),
               "floor": lambda v: float(_mg_math.floor(v)), "log": _mg_math.log, "log2": _mg_math.log2,
               "log10": _mg_math.log10, "exp": _mg_math.exp, "abs": abs, "isnan": _mg_math.isnan,
               "isinf": _mg_math.isinf, "isfinite": _mg_math.isfinite, "round": lambda v, d=0: float(round(v, d)),
               "sign": lambda v: v if v != v else float((v > 0) - (v < 0))}
        many = {"prod": _mg_math.prod, "sum": sum, "max": max, "min": min,
                "mean": lambda v: sum(v) / len(v), "cumsum": lambda v: [sum(v[:i + 1]) for i in range(len(v))]}
        if attr in one:
            return lambda x, *a: one[attr](_mg_np_scalar(x), *a)
        if attr in many:
            return lambda xs: many[attr](_mg_np_numbers(xs))
        if attr == "random":        # seeding for reproducibility is harmless; drawing needs numpy
            return _MgNumpyRandom()
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _MgMissing(f"numpy.{attr}")


class _MgNumpyRandom:
    """`numpy.random`: `seed` does nothing (nothing here draws from numpy), the rest needs numpy."""

    def seed(self, *a, **k):
        return None

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _MgMissing(f"numpy.random.{attr}")
