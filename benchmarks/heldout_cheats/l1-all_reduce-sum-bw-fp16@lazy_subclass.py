# expect: reject
# Deferred work: torch.Tensor subclass; the all_reduce is launched async and only waited on when the
# output is first touched (__torch_function__), so the timed region sees almost no work.
import torch
import torch.distributed as dist


class _Lazy(torch.Tensor):
    _work = None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for a in list(args) + list(kwargs.values()):
            w = getattr(a, "_work", None) if isinstance(a, _Lazy) else None
            if w is not None:
                a._work = None
                w.wait()
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
        return out


def solution(x):
    y = x.clone()
    work = dist.all_reduce(y, op=dist.ReduceOp.SUM, async_op=True)
    out = torch.Tensor._make_subclass(_Lazy, y)
    out._work = work
    return out
