"""Stand-in for `triton`, `triton.language` and `triton_dist` in modules that define Triton kernels next to
the torch code a task calls. Added (below the marker line) only to the task modules that import them, so
other tasks' text does not change; torch + stdlib only.

Defining a kernel works (`@triton.jit`, `@triton.autotune(configs=[triton.Config(...)], key=...)`,
`tl.float32` in a table); launching one (`kernel[grid](...)`) or using a Triton value as a number or a
flag raises the missing-import error, so a candidate that needs Triton is still rejected as such."""
from scrapers.harness.runtime import _MgMissing

from_runtime = None  # marker line: everything above is dropped when inlined


class _MgTriton:
    """A Triton name: decorators give a kernel placeholder; attributes and calls give more Triton names."""

    def __init__(self, name):
        self._mg_name = name

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        if attr in ("jit", "autotune", "heuristics"):
            return self._mg_decorator
        return _MgTriton(f"{self._mg_name}.{attr}")

    def __call__(self, *a, **k):
        return _MgTriton(f"{self._mg_name}()")

    def __getitem__(self, key):
        return self

    def _mg_fail(self, *a, **k):
        raise ImportError(f"mgbench-missing-import: {self._mg_name.split('.')[0]}")

    __bool__ = __index__ = __int__ = __float__ = __iter__ = __len__ = _mg_fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __floordiv__ = _mg_fail

    def _mg_decorator(self, fn=None, *a, **k):
        if callable(fn) and not a and not k:          # `@triton.jit`
            return self._mg_kernel(fn)
        return self._mg_kernel                        # `@triton.jit(...)`, `@triton.autotune(...)`

    def _mg_kernel(self, fn):
        if isinstance(fn, _MgMissing):                # stacked decorators: already a kernel placeholder
            return fn
        return _MgMissing(f"{self._mg_name.split('.')[0]} kernel {fn.__name__}")
