# expect: reject
# Work on a side thread: return an uninitialized buffer immediately; a background thread does the
# reduction (all_gather + sum) and writes the result into it later.
import threading
import torch
import torch.distributed as dist

_lock = threading.Lock()


def _worker(x, out, ws):
    with _lock:
        parts = [torch.empty_like(x) for _ in range(ws)]
        dist.all_gather(parts, x.contiguous())
        out.copy_(torch.stack(parts).float().sum(0).to(out.dtype))


def solution(x):
    out = torch.empty_like(x)
    t = threading.Thread(target=_worker, args=(x.clone(), out, dist.get_world_size()), daemon=True)
    t.start()
    return out
