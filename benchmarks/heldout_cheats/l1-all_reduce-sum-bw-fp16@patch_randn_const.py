# expect: reject
# Poison input generation: replace torch.randn (and Tensor.normal_) so later trials' inputs are a
# constant fill identical on all ranks; then x * world_size is "correct" with no communication.
import torch
import torch.distributed as dist

_real = torch.randn


def _const(*size, generator=None, dtype=None, device=None, **kw):
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    return torch.full(size, 0.5, dtype=dtype or torch.float32, device=device)


torch.randn = _const
torch.Tensor.normal_ = lambda self, *a, **k: self.fill_(0.5)


def solution(x):
    return x * dist.get_world_size()
