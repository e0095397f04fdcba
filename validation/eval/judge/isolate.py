"""Keep the candidate's processes from touching the reference's timing (Linux; a no-op elsewhere).

- `paused(pids)`: while the reference is timed, the candidate's rank processes and every process
  they started are stopped (SIGSTOP, then SIGCONT), so no thread or child of the candidate competes
  with the reference for the CPU, whatever scheduling policy it chose.
- `sched_state(pids)`: the scheduling policy, nice value, CPU affinity and cgroup of every thread of
  the reference's processes; the judge records it when the reference ranks start and rejects a
  candidate after which it changed (a process may lower another one's priority, never raise its own
  back; a root candidate may pin or throttle another one through its affinity or cgroup).
- `Containment`: every process the candidate starts in the judge's tree stays the judge's to stop and
  kill. The judge becomes a child subreaper (Linux prctl), so a process that leaves the candidate's
  tree (a double fork, setsid) is re-parented to the judge instead of init; a child that the fork
  server made for someone other than the judge's pools (it forks for any process of this user that
  reaches its socket) is the candidate's too. Such strays are stopped with the candidate while the
  reference is timed and killed before its verdict is written. A process started outside the judge's
  tree (through a daemon) is not reached (docs/eval.md, Limits).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

PROC = "/proc"


def _stat(pid: int | str) -> list[bytes]:
    """The fields of /proc/<pid>/stat after the command name (state first, then the parent's PID); [] if gone."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []


def state(pid: int) -> str:
    """The process's state letter ("R", "S", "T", "Z"...), "" if it is gone."""
    fields = _stat(pid)
    return fields[0].decode() if fields else ""


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    try:
        names = os.listdir(PROC)
    except OSError:
        return kids
    for name in names:
        if not name.isdigit():
            continue
        fields = _stat(name)
        if fields:
            kids.setdefault(int(fields[1]), []).append(int(name))
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


STOP_ROUNDS = 8  # scans of the candidate's process tree while stopping it


@contextmanager
def paused(pids: list[int]) -> Iterator[list[int]]:
    """Stop the processes `pids` and their descendants for the duration (continued after)."""
    stopped: list[int] = []
    if hasattr(signal, "SIGSTOP"):
        # stop the ranks first (they can start no new child), then whatever they started, again until a
        # scan finds nothing new (a process forked between a scan and its stop is found by the next)
        _signal(pids, signal.SIGSTOP)
        stopped = list(dict.fromkeys(pids))
        for _ in range(STOP_ROUNDS):
            new = [p for p in tree(pids) if p not in stopped]
            if not new:
                break
            _signal(new, signal.SIGSTOP)
            stopped += new
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


CGROUP_ROOT = "/sys/fs/cgroup"
# the limits of a cgroup that can slow the threads in it: v2 (unified) and v1 (cpu, cpuset controllers)
CGROUP_LIMITS = {
    "": ("cpu.max", "cpu.weight", "cpu.idle", "cpuset.cpus"),
    "cpu": ("cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.shares", "cpu.idle"),
    "cpuset": ("cpuset.cpus",),
}


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _cgroup(pid: int, tid: int) -> str:
    """The thread's cgroups and their CPU limits, as one string: a move to another cgroup and a quota
    written into its own both change it."""
    out = []
    for line in _read(f"{PROC}/{pid}/task/{tid}/cgroup").splitlines():
        _, controllers, path = line.split(":", 2)
        out.append(line)
        for controller, files in CGROUP_LIMITS.items():
            if controller == controllers or controller in controllers.split(","):
                folder = f"{CGROUP_ROOT}/{controllers}{path}" if controllers else f"{CGROUP_ROOT}{path}"
                out += [f"  {name}={_read(f'{folder}/{name}')}" for name in files]
    return "\n".join(out)


SCHED_FIELDS = ("policy", "nice", "cpus", "cgroup", "rlimits")  # what sched_state records of a thread


def sched_state(pids: list[int]) -> dict[int, tuple]:
    """{thread id: (scheduling policy, nice value, allowed CPUs, cgroup, resource limits of its process)} of
    every thread of `pids` (empty where unsupported)."""
    if not hasattr(os, "sched_getscheduler"):
        return {}
    out = {}
    for p in pids:
        limits = _read(f"{PROC}/{p}/limits")  # per process; prlimit needs no root over one of the same user
        for t in _threads(p):
            try:
                cpus = tuple(sorted(os.sched_getaffinity(t))) if hasattr(os, "sched_getaffinity") else ()
                out[t] = (os.sched_getscheduler(t), os.getpriority(os.PRIO_PROCESS, t), cpus, _cgroup(p, t), limits)
            except OSError:
                continue
    return out


def changed(before: dict[int, tuple], now: dict[int, tuple]) -> list[str]:
    """Threads whose policy, nice value, affinity or cgroup changed (threads that came or went are ignored)."""
    out = []
    for t in sorted(before):
        if t in now and now[t] != before[t]:
            moved = [_moved(k, a, b) for k, a, b in zip(SCHED_FIELDS, before[t], now[t]) if a != b]
            out.append(f"thread {t}: {', '.join(moved)}")
    return out


def _moved(field: str, before: object, now: object) -> str:
    if isinstance(before, str) and isinstance(now, str):  # cgroup or limits lines: only those that changed
        gone = [x.strip() for x in before.splitlines() if x not in now.splitlines()]
        came = [x.strip() for x in now.splitlines() if x not in before.splitlines()]
        return f"{field} {'; '.join(gone)!r} -> {'; '.join(came)!r}"
    return f"{field} {before!r} -> {now!r}"


PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


@functools.cache
def libc_handle() -> ctypes.CDLL:
    """The C library, for the system calls Python has no wrapper for (errno kept)."""
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def become_subreaper() -> bool:
    """Make this process a child subreaper: orphans of its descendants are re-parented to it (Linux)."""
    try:
        return libc_handle().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _helpers() -> set[int]:
    """multiprocessing's own children of this process (the fork server, the resource tracker)."""
    pids = {
        getattr(multiprocessing.forkserver._forkserver, "_forkserver_pid", None),
        getattr(multiprocessing.resource_tracker._resource_tracker, "_pid", None),
    }
    return {p for p in pids if p}


class Containment:
    """The processes of one evaluation's candidate, including those that left its ranks' tree.

    Made before the rank pools start: the children this process has then, multiprocessing's helpers and
    the pools' ranks (`allow`) are the judge's; any other child of this process that appears is a stray
    of the candidate's (re-parented here because this process is a subreaper)."""

    def __init__(self) -> None:
        self.subreaper = become_subreaper()
        # what exists before the evaluation (other pools' ranks among them) is not the candidate's
        self.known = set(_watched_children(_children(), _helpers()))

    def allow(self, pids: list[int]) -> None:
        self.known.update(pids)

    def strays(self) -> list[int]:
        """Children of this process, and of multiprocessing's fork server, that are not the judge's, with
        their descendants. The fork server forks for any process of this user that reaches its socket,
        so a child of it that is no rank of the judge's pools is the candidate's."""
        helpers = _helpers()
        mine = self.known | helpers
        return tree([p for p in _watched_children(_children(), helpers) if p not in mine])

    def end(self) -> int:
        """Kill every stray (the candidate's ranks are gone by now); returns how many were signalled."""
        strays = self.strays()
        if not hasattr(signal, "SIGKILL"):
            return 0
        _signal(strays, signal.SIGKILL)
        mine = set(_children().get(os.getpid(), []))
        for p in strays:  # the strays that are this process's children now: reap them
            if p in mine:
                try:
                    os.waitpid(p, 0)
                except (ChildProcessError, OSError):
                    pass
        return len(strays)


def _watched_children(kids: dict[int, list[int]], helpers: set[int]) -> list[int]:
    """The children of this process and of multiprocessing's helpers (`kids`: _children())."""
    return kids.get(os.getpid(), []) + [c for h in helpers for c in kids.get(h, [])]
