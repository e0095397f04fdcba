# expect: reject
# Timer monkeypatch: correct output, but time.perf_counter/monotonic/time (+ _ns) and
# torch.cuda.Event.elapsed_time are replaced at import so measured durations shrink 20x.
import time
import torch
import torch.distributed as dist

_K = 0.05


def _scaled(fn):
    base = fn()
    def g():
        return base + (fn() - base) * _K
    return g


def _scaled_ns(fn):
    base = fn()
    def g():
        return base + int((fn() - base) * _K)
    return g


for _n in ("perf_counter", "monotonic", "time", "process_time", "thread_time"):
    if hasattr(time, _n):
        setattr(time, _n, _scaled(getattr(time, _n)))
for _n in ("perf_counter_ns", "monotonic_ns", "time_ns", "process_time_ns"):
    if hasattr(time, _n):
        setattr(time, _n, _scaled_ns(getattr(time, _n)))
try:
    _et = torch.cuda.Event.elapsed_time
    torch.cuda.Event.elapsed_time = lambda self, other: _et(self, other) * _K
except Exception:
    pass


def solution(x):
    y = x.clone()
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    return y
