"""Stand-in for `triton`, `triton.language` and `triton_dist` in modules that define Triton kernels next to
the torch code a task calls. Added only to the task modules that import them, so other tasks' text does
not change. A text part (torch + stdlib only), not imported: it uses the runtime's `_MgMissing` and
`_MgBase` (part 2).

Defining a kernel works (`@triton.jit`, `@triton.autotune(configs=[triton.Config(...)], key=...)`,
`tl.float32` in a table); launching one (`kernel[grid](...)`) or using a Triton value as a number or a
flag raises the missing-import error, so a candidate that needs Triton is still rejected as such."""


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
        if len(a) == 1 and not k and callable(a[0]):    # an unknown decorator: the function is not run as is
            return self._mg_kernel(a[0])
        return _MgTriton(f"{self._mg_name}()")

    def __getitem__(self, key):
        return self

    def __mro_entries__(self, bases):                    # `class A(triton.runtime.Autotuner)`: defined, unusable
        return (_MgBase,)

    def _mg_fail(self, *a, **k):
        raise ImportError(f"mgbench-missing-import: {self._mg_name.split('.')[0]}")

    __bool__ = __index__ = __int__ = __float__ = __iter__ = __len__ = __neg__ = __abs__ = _mg_fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _mg_fail
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __lshift__ = __rshift__ = _mg_fail
    __lt__ = __le__ = __gt__ = __ge__ = _mg_fail

    def _mg_decorator(self, fn=None, *a, **k):
        if callable(fn) and not a:                    # `@triton.jit`, `triton.jit(fn, debug=True)`
            return self._mg_kernel(fn)
        return self._mg_kernel                        # `@triton.jit(...)`, `@triton.autotune(...)`

    def _mg_kernel(self, fn):
        if isinstance(fn, _MgMissing):                # stacked decorators: already a kernel placeholder
            return fn
        return _MgMissing(f"{self._mg_name.split('.')[0]} kernel {getattr(fn, '__name__', '?')}")
