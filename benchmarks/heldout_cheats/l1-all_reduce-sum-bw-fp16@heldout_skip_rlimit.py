# expect: reject
# WRONG candidate (only right at the published n) that gets the held-out-shape trial SKIPPED.
# runner._heldout / Session.trial turn ANY failure of the reference ranks on a held-out shape into
# "skip" (a note), on the theory that the reference itself cannot run that shape. The candidate's own
# rank can make the reference fail there: on its 5th correctness call (the last published-shape trial;
# the held-out trial follows at once, reference first) it caps the address space of the reference
# ranks (resource.prlimit on a sibling process: same user, no ptrace, not a scheduling property the
# `interference` check looks at) at what they use now. The published-size jobs that follow reuse freed
# memory and still run, but the held-out shape (up to 8x larger) needs new memory, the reference's
# make_inputs/oracle raise (an error reply, no crash, no pool restart), the trial is skipped and the
# candidate is never called at a held-out shape. The cap is lifted on its next call (the first timed
# batch). The solution returns zeros for every n but 4096 (a hard-coded "kernel").
import os
import resource

import torch
import torch.distributed as dist

_n = [0]
_cands = []
_saved = {}

if dist.is_initialized():
    _p = torch.tensor([os.getpid()], dtype=torch.int64)
    _all = [torch.zeros_like(_p) for _ in range(dist.get_world_size())]
    dist.all_gather(_all, _p)
    _cands = [int(t) for t in _all]


def _refs():
    server, out = os.getppid(), []
    for n in os.listdir("/proc"):
        if n.isdigit() and int(n) not in _cands:
            try:
                with open(f"/proc/{n}/stat", "rb") as f:
                    if int(f.read().rsplit(b")", 1)[1].split()[1]) == server:
                        out.append(int(n))
            except OSError:
                pass
    return out


def _vmsize(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return None


def _cap():
    for p in _refs():
        try:
            _saved[p] = resource.prlimit(p, resource.RLIMIT_AS)
            resource.prlimit(p, resource.RLIMIT_AS, (_vmsize(p), _saved[p][1]))
        except (OSError, ValueError, TypeError):
            pass


def _uncap():
    for p, lim in list(_saved.items()):
        try:
            resource.prlimit(p, resource.RLIMIT_AS, lim)
        except (OSError, ValueError):
            pass
    _saved.clear()


def solution(x):
    _n[0] += 1
    if _saved:
        _uncap()
    if x.numel() != 4096:
        return torch.zeros_like(x)  # "fixed-size kernel": wrong everywhere else
    y = x.clone()
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    if _n[0] == 5 and dist.get_rank() == 0:
        _cap()
    return y
