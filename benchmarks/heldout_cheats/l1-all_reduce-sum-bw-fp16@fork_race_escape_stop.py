# expect: reject
# Escape the reference-timing stop through a race in isolate.paused (speed credited that was not
# earned; every output is right). paused() SIGSTOPs the leader, then lists /proc, builds the process
# tree from that snapshot and SIGSTOPs what it found. A process forked after the listing is in no
# snapshot and is never stopped; the candidate's ranks (only the leader is stopped first) and their
# helpers keep running during the scan. A helper (os.posix_spawnp of a small python: its code is a
# string, unseen by the static rules and the audit hook) makes the scan slow (300 sleeping children:
# the judge reads one /proc/N/stat per process) and, when the rank arms it (right after the held-out
# call, and after the last call of the candidate's second timing job: the reference is timed next),
# forks a short-lived child every 0.25 ms. Each child sleeps 8 ms, then looks at the rank: stopped
# means it was born inside the judge's window and escaped, so it takes one of 4 slots and spins until
# the rank runs again. The reference is timed against 4 spinning processes; the candidate (a plain
# all_reduce) is credited the difference.
import os
import sys
import time

import torch
import torch.distributed as dist

_HELPER = r'''
import os, select, sys, time
r, rank_pid, tag = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def rank_stopped():
    try:
        with open(f"/proc/{rank_pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"T", b"t")
    except OSError:
        return False
def child():
    time.sleep(0.008)
    if not rank_stopped():
        os._exit(0)
    for i in range(2):  # 2 spinners per helper, 4 in all
        slot = f"/dev/shm/.slot-{tag}-{i}"
        try:
            fd = os.open(slot, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except OSError:
            continue
        try:
            while rank_stopped():
                t = time.perf_counter()
                while time.perf_counter() - t < 0.002:
                    pass
        finally:
            os.unlink(slot)
        os._exit(0)
    os._exit(0)
for _ in range(150):  # sleepers: a slower /proc scan, a wider window
    if os.fork() == 0:
        os.read(r, 1)  # never written: sleeps until the namespace ends
        os._exit(0)
armed, since = False, 0.0
while True:
    if armed and time.monotonic() - since > 1.5:  # a lost disarm must not slow the candidate's own jobs
        armed = False
    ready, _, _ = select.select([r], [], [], 0.00025 if armed else None)
    if ready:
        b = os.read(r, 64)
        if not b:
            break
        armed, since = b[-1:] == b"A", time.monotonic()
        continue
    if os.fork() == 0:
        child()
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
'''

_st = {"w": None, "last_end": 0.0, "pos": 0, "k": 0, "calls": 0, "bursts": 0, "n0": None, "armed": False}


def _start(rank):
    r, w = os.pipe()
    os.set_inheritable(r, True)
    os.posix_spawnp(sys.executable, [sys.executable, "-S", "-c", _HELPER, str(r), str(os.getpid()), str(rank)], dict(os.environ))
    os.close(r)
    _st["w"] = w


def _bursts_per_job(k):
    return max(10, min(40, -(-50 // max(k, 1)))) + 1


def solution(x):
    t0 = time.perf_counter()
    st = _st
    if st["calls"] == 0 and dist.get_rank() < 2:
        _start(dist.get_rank())
    if st["armed"]:
        os.write(st["w"], b"D")
        st["armed"] = False
    st["calls"] += 1
    if st["n0"] is None:
        st["n0"] = x.numel()
    timing = st["calls"] > 6
    if timing:
        if t0 - st["last_end"] < 0.001:
            st["pos"] += 1
        else:
            if st["bursts"] == 1:
                st["k"] = st["pos"]
            st["bursts"] += 1
            st["pos"] = 1

    y = x.clone()
    dist.all_reduce(y, op=dist.ReduceOp.SUM)

    last_of_job2 = (
        timing and st["k"] > 0 and st["pos"] == st["k"] and st["bursts"] >= 2 * _bursts_per_job(st["k"])
    )
    if st["w"] is not None and (st["calls"] == 6 or x.numel() != st["n0"] or last_of_job2):
        os.write(st["w"], b"A")
        st["armed"] = True
    st["last_end"] = time.perf_counter()
    return y
