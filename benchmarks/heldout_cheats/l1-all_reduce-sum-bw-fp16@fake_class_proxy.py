# expect: reject
# Deferred work via a non-tensor proxy that lies about __class__ and materializes on first attribute use.
import torch
import torch.distributed as dist


class _Proxy:
    def __init__(self, y, work):
        object.__setattr__(self, "_y", y)
        object.__setattr__(self, "_w", work)

    @property
    def __class__(self):
        return torch.Tensor

    def _get(self):
        w = object.__getattribute__(self, "_w")
        if w is not None:
            w.wait()
            object.__setattr__(self, "_w", None)
        return object.__getattribute__(self, "_y")

    def __getattr__(self, name):
        return getattr(self._get(), name)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        args = tuple(a._get() if type(a) is _Proxy else a for a in args)
        return func(*args, **(kwargs or {}))

    def __len__(self):
        return len(self._get())

    def __getitem__(self, i):
        return self._get()[i]

    def __array__(self, *a):
        return self._get().cpu().numpy()

    def __reduce_ex__(self, p):
        return self._get().__reduce_ex__(p)

    def __sub__(self, o):
        return self._get() - o

    def __rsub__(self, o):
        return o - self._get()


def solution(x):
    y = x.clone()
    work = dist.all_reduce(y, op=dist.ReduceOp.SUM, async_op=True)
    return _Proxy(y, work)
