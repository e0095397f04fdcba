# expect: reject
# trigger: conditional (prints "mgbench-heldout: fired decoy_answered_locally" on stderr when its cheat runs)
# Exploit the structure of the judge's decoy: every timed batch holds one decoy, an earlier call's input
# set of the same batch with two elements swapped AT THE SAME POSITIONS ON EVERY RANK (timed.perturb,
# positions from a seed shared by all ranks). For an elementwise task the decoy's answer is therefore the
# earlier call's answer with the same two elements swapped, computable locally with no communication.
# Each rank recognizes the decoy on its own (its input equals a recent input except for one swapped
# pair), answers it from the earlier output, and skips the collective; every rank decides alike, so
# nothing desynchronizes. The decoy is always verified and is right, so the candidate passes while
# one call per batch is free: speed earned from the judge's input schedule, not from the kernel.
import sys
import time

import torch
import torch.distributed as dist

_recent = []  # (input copy, output) of calls made back to back
_last = [0.0]


def _fired(_said=[]):  # noqa: B006 -- once per process
    """Say, once, that the cheat ran (benchmarks/heldout_eval.py tells a missed cheat from an unfired one)."""
    if not _said:
        _said.append(True)
        print("mgbench-heldout: fired decoy_answered_locally", file=sys.stderr, flush=True)


def solution(x):
    now = time.perf_counter()
    if now - _last[0] > 0.002:  # a gap: a new batch (or a correctness trial): forget
        _recent.clear()
    try:
        flat = x.reshape(-1)
        for xin, yout in _recent:
            if xin.shape != flat.shape:
                continue
            diff = (xin != flat).nonzero().reshape(-1)
            if diff.numel() == 2:
                a, b = int(diff[0]), int(diff[1])
                if bool(xin[a] == flat[b]) and bool(xin[b] == flat[a]):
                    _fired()
                    y = yout.clone()
                    y[a], y[b] = yout[b], yout[a]
                    return y.reshape(x.shape)
        y = flat.clone()
        dist.all_reduce(y)
        _recent.append((flat.clone(), y))
        del _recent[:-8]
        return y.clone().reshape(x.shape)
    finally:
        _last[0] = time.perf_counter()
