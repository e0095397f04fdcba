# expect: reject
# Wrong shape that broadcasts: reduce the vector correctly but return it as shape (1, n), hoping a broadcasting comparison ignores the extra dimension.
# return it as shape (1, n), hoping a broadcasting comparison ignores the extra dimension.
import torch
import torch.distributed as dist


def solution(x):
    y = x.clone()
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    return y.unsqueeze(0)
