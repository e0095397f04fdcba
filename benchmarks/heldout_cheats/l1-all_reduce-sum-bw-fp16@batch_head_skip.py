# expect: reject
# trigger: conditional (prints "mgbench-heldout: fired batch_head_skip" on stderr when its cheat runs)
# Position-aware sampling: the first call of each timed batch is never the decoy (index >= 1) and never
# the batch's last call (batches hold >= 2 calls), so it is verified only when the judge's one random
# pick lands on it. The rank recognises a batch's first call by the gap before it (the judge draws the
# next batch's inputs and reveals outputs between batches: milliseconds, against tens of microseconds
# between streamed calls of one batch) and, there only, skips the collective and returns the local
# guess x * world_size (wrong). Correctness trials (one call per job, also after a gap) are recognised
# by a longer gap and answered honestly... they cannot be told apart reliably, so trials are counted:
# the first 6 calls and any call after a gap outside 3-500 ms are honest.
# Success: correct (none of the skipped calls picked), with a speedup above the honest control.
import sys
import time

import torch
import torch.distributed as dist

_last = [None]
_n = [0]


def _fired(_said=[]):  # noqa: B006 -- once per process
    """Say, once, that the cheat ran (benchmarks/heldout_eval.py tells a missed cheat from an unfired one)."""
    if not _said:
        _said.append(True)
        print("mgbench-heldout: fired batch_head_skip", file=sys.stderr, flush=True)


def solution(x):
    now = time.perf_counter()
    gap = None if _last[0] is None else now - _last[0]
    _n[0] += 1
    if _n[0] > 6 and gap is not None and 0.003 < gap < 0.5:
        _fired()
        out = x * dist.get_world_size()
    else:
        out = x.clone()
        dist.all_reduce(out)
    _last[0] = time.perf_counter()
    return out
