"""Keep the candidate's processes from touching the reference's timing (Linux; a no-op elsewhere).

- `paused(pids)`: while the reference is timed, the candidate's rank processes and every process
  they started are stopped (SIGSTOP, then SIGCONT), so no thread or child of the candidate competes
  with the reference for the CPU, whatever scheduling policy it chose.
- `sched_state(pids)`: the scheduling policy and nice value of every thread of the reference's
  processes; the judge records it when the reference ranks start and rejects a candidate after
  which it changed (a process may lower another one's priority, never raise its own back).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

PROC = "/proc"


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    try:
        names = os.listdir(PROC)
    except OSError:
        return kids
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"{PROC}/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(b")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


def tree(pids: list[int]) -> list[int]:
    """`pids` and all their descendants (by /proc; just `pids` where there is no /proc)."""
    kids = _children()
    out, todo = [], list(pids)
    while todo:
        p = todo.pop()
        if p not in out:
            out.append(p)
            todo += kids.get(p, [])
    return out


def _signal(pids: list[int], sig: int) -> None:
    for p in pids:
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            pass


@contextmanager
def paused(pids: list[int]) -> Iterator[list[int]]:
    """Stop the processes `pids` and their descendants for the duration (continued after)."""
    stopped: list[int] = []
    if hasattr(signal, "SIGSTOP"):
        # stop the ranks first (they can start no new child), then whatever they started
        _signal(pids, signal.SIGSTOP)
        stopped = tree(pids)
        _signal(stopped, signal.SIGSTOP)
    try:
        yield stopped
    finally:
        if stopped:
            _signal(stopped, signal.SIGCONT)


def _threads(pid: int) -> list[int]:
    try:
        return sorted(int(t) for t in os.listdir(f"{PROC}/{pid}/task"))
    except OSError:
        return [pid]


def sched_state(pids: list[int]) -> dict[int, tuple[int, int]]:
    """{thread id: (scheduling policy, nice value)} of every thread of `pids` (empty where unsupported)."""
    if not hasattr(os, "sched_getscheduler"):
        return {}
    out = {}
    for p in pids:
        for t in _threads(p):
            try:
                out[t] = (os.sched_getscheduler(t), os.getpriority(os.PRIO_PROCESS, t))
            except OSError:
                continue
    return out


def changed(before: dict[int, tuple[int, int]], now: dict[int, tuple[int, int]]) -> list[str]:
    """Threads whose policy or nice value changed (threads that came or went are ignored)."""
    return [
        f"thread {t}: policy/nice {before[t]} -> {now[t]}" for t in sorted(before) if t in now and now[t] != before[t]
    ]
