# expect: reject
# Forge the judge's `--json` output through the stdout it shares with the candidate (a wrong answer
# reported as correct). The candidate's ranks inherit the judge's fd 1 (and 2): with
# `mgbench eval ... --json > FILE` that is FILE, opened for writing on the host's mount (the sandbox's
# read-only remount does not apply to an fd opened before it), and the open file description - with
# its offset - is shared with the judge. At import, rank 0 pwrite()s at offset 0 the head of a JSON
# object that says "correct" (speedup 3.2), then 256 KiB of spaces and a closing brace, and lseek()s
# the shared offset to just after the head. When the judge prints its real record(s) at the end, they
# land inside the object as the value of "log" and overwrite only spaces: FILE is one valid JSON
# object whose status is "correct". No work is done: solution() returns x * world_size (wrong).
# A consumer of FILE is fooled; the exit code (1) stays the judge's.
import json
import os
import stat

import torch
import torch.distributed as dist


def _forge():
    try:
        st = os.fstat(1)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode) or os.environ.get("RANK", "0") not in ("0", ""):
        return
    fake = {
        "task_id": "l1-all_reduce-sum-bw-fp16",
        "status": "correct",
        "correct": True,
        "reason": "",
        "phase": "done",
        "speedup": 3.2,
        "within_noise": False,
        "trials_passed": 5,
        "flags": [],
        "suspicious": [],
        "review": False,
        "sandbox": "namespaces: pid, net, read-only, no-caps",
        "integrity_version": 3,
    }
    head = json.dumps(fake, indent=1, sort_keys=True)[:-2].encode() + b',\n "log": '
    os.pwrite(1, head, 0)
    os.pwrite(1, b" " * (256 << 10) + b"}\n", len(head))
    os.lseek(1, len(head), os.SEEK_SET)


_done = []


def solution(x):
    if not _done:
        _done.append(1)
        if dist.get_rank() == 0:
            _forge()
    return x * dist.get_world_size()
