# expect: reject
# Timing-loop detection by call count: the first 3 calls (assumed correctness trials) are honest;
# later calls with the same shape return the previous result without communicating.
import torch
import torch.distributed as dist

_state = {"n": 0, "last": None}


def solution(x):
    _state["n"] += 1
    last = _state["last"]
    if _state["n"] > 3 and last is not None and last.shape == x.shape and last.dtype == x.dtype:
        return last
    y = x.clone()
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    _state["last"] = y
    return y
