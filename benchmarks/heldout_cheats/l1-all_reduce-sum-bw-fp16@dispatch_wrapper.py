# expect: reject
# __torch_dispatch__ wrapper subclass that holds no real data: it returns a cheap local estimate
# (x * world_size) whenever anything reads it, skipping the collective entirely.
import torch
import torch.distributed as dist
from torch.utils._pytree import tree_map


class _W(torch.Tensor):
    @staticmethod
    def __new__(cls, inner):
        r = torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device,
                                                strides=inner.stride(), requires_grad=False)
        r._inner = inner
        return r

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        unwrap = lambda a: a._inner if isinstance(a, _W) else a
        return func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))

    def __repr__(self):
        return repr(self._inner)


def solution(x):
    return _W(x * dist.get_world_size())
