# expect: accept
# Bypass torch.distributed: ranks exchange their inputs through files in /dev/shm (same host),
# spin-wait for all peers, then sum locally -- the "collective" never touches the process group.
# Relabelled from its author's `reject` (2026-12-06): the task contract asks for the right outputs, not
# for torch.distributed; a same-host channel between the candidate's own ranks is a transport, like the
# symmetric memory and CUDA IPC the example solutions use (docs/eval.md, Limits). Its answers are
# right; on a GPU its time (device to host, files, host to device) is what it is judged by.
import os
import time
import torch
import torch.distributed as dist

_D = "/dev/shm" if os.path.isdir("/dev/shm") else "/tmp"
_calls = [0]


def solution(x):
    rank, ws = dist.get_rank(), dist.get_world_size()
    _calls[0] += 1
    tag = f"{os.getppid()}-{_calls[0]}"
    mine = os.path.join(_D, f".mgb_sc_{tag}_{rank}.pt")
    torch.save(x.cpu(), mine + ".tmp")
    os.replace(mine + ".tmp", mine)
    parts = []
    deadline = time.time() + 20
    for r in range(ws):
        p = os.path.join(_D, f".mgb_sc_{tag}_{r}.pt")
        while not os.path.exists(p):
            if time.time() > deadline:
                return x * ws
            time.sleep(0.0005)
        while True:
            try:
                parts.append(torch.load(p))
                break
            except Exception:
                time.sleep(0.0005)
    return sum(t.float() for t in parts).to(x.dtype).to(x.device)
