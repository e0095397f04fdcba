"""The candidate's sandbox: its rank processes in Linux namespaces of their own (docs/eval.md, "Sandbox").

The candidate's ranks start under one leader process (a child of the judge's fork server, holding
nothing). A child of the leader enters a new user, mount and network namespace and a new PID
namespace, whose first process (`init`, PID 1 there) builds the walls and then forks the ranks:

- **PID namespace** with a fresh `/proc`: the candidate sees, signals, traces and reads the memory of
  its own processes only; the judge, the reference ranks and the fork server have no PID there. When
  `init` ends, the kernel kills every process of the namespace: nothing the candidate starts can
  outlive its ranks (it dies with the leader, which the judge kills).
- **Network namespace** with its own loopback: the judge's and the reference ranks' TCP ports and
  abstract UNIX sockets are out of reach; the candidate's ranks
  still meet each other (gloo, NCCL bootstrap) on their own 127.0.0.1.
- **Mount namespace**: every filesystem read-only (the results, the samples, the harness's code),
  a private writable `/dev/shm` shared by the candidate's ranks (their TMPDIR and caches), the fork
  server's socket folder covered by an empty one.
- **No capabilities**: `init` drops every capability (bounding set included) and sets no_new_privs
  before the ranks start, so candidate code cannot undo a mount; a user namespace it makes itself
  inherits the mounts locked and read-only.
- **Its own descriptors and output**: `init` closes what the fork server's child inherited (the judge's
  stdout among them); the ranks' stdout and stderr are relayed to the judge's stderr.
- **Nothing between its calls**: after every job on the candidate's ranks the judge kills every process
  in the sandbox that is not its own (`reap`), so no helper watches the judge's pipes for the next
  batch or loads the CPU while the reference is timed.

This module is the judge's side (start, probe, reap); what runs inside is `walls.py`. Uids map one
to one (the candidate is the judge's user, unprivileged). What the sandbox does not do (a second
user, seccomp, GPU isolation) is in docs/eval.md, "Limits".

`mode`: "auto" builds the sandbox where the kernel allows unprivileged user namespaces and otherwise
starts the ranks from the fork server as any RankPool (the record's `sandbox` says which); "require"
refuses to run the candidate without it; "off" never builds it.
"""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import sys
import tempfile
import time
from dataclasses import asdict
from typing import Any

from mgbench.validation.eval.judge.isolate import libc_handle, state, tree
from mgbench.validation.eval.judge.walls import Walls, enter_namespaces, forkserver_address, leader_main
from mgbench.validation.pool import RankPool, free_port

MODES = ("auto", "require", "off")

_AVAILABLE: list[bool] = []


def available() -> bool:
    """Whether this kernel lets this user make the sandbox's namespaces (probed once, in a forked child)."""
    if not _AVAILABLE:
        ok = False
        if hasattr(os, "fork") and sys.platform.startswith("linux"):
            libc = libc_handle()  # before the fork: finding the library may run a subprocess
            pid = os.fork()
            if pid == 0:
                try:
                    enter_namespaces(libc)
                    os._exit(0)
                except BaseException:  # noqa: BLE001 - any failure means no sandbox
                    os._exit(1)
            _, st = os.waitpid(pid, 0)
            ok = os.waitstatus_to_exitcode(st) == 0
        _AVAILABLE.append(ok)
    return _AVAILABLE[0]


TEMP_ROOTS = ("/tmp", "/var/tmp")  # beside tempfile.gettempdir(): where multiprocessing's folders live


def folders_to_hide() -> list[str]:
    """What the candidate must not reach by path: the socket folder of this judge's fork server and of
    every other multiprocessing fork server of this user whose folder exists now (another evaluation's:
    a fork server forks for any process of its user that reaches its socket), and the user's runtime
    folder (the session bus that spawns services)."""
    out = []
    address = forkserver_address()
    if address and not address.startswith("\0"):
        out.append(os.path.dirname(address))
    for root in dict.fromkeys([tempfile.gettempdir(), *TEMP_ROOTS]):
        try:
            names = os.listdir(root)
        except OSError:
            continue
        out += [os.path.join(root, n) for n in sorted(names) if n.startswith("pymp-") and _has_socket(root, n)]
    out.append(os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}")
    return [f for f in dict.fromkeys(out) if f and os.path.isdir(f) and _owned(f)]


def _has_socket(root: str, name: str) -> bool:
    try:
        return any(f.startswith("listener-") for f in os.listdir(os.path.join(root, name)))
    except OSError:
        return False


def _owned(folder: str) -> bool:
    try:
        return os.stat(folder).st_uid == os.getuid()
    except OSError:
        return False


def start_pool(pool: Any, mode: str) -> Walls:
    """Start `pool`'s ranks (a RankPool not yet started) in the sandbox under one leader; returns what
    holds. "off", and "auto" where the sandbox cannot be built, start them as any RankPool does (the
    Walls say why); "require" raises instead."""
    if mode not in MODES:
        raise ValueError(f"sandbox mode {mode!r}: one of {', '.join(MODES)}")
    why = "sandbox off" if mode == "off" else "" if available() else "no unprivileged user namespaces"
    if not why:
        ctx = multiprocessing.get_context(pool.start_method)
        if pool.start_method == "forkserver":
            multiprocessing.forkserver.ensure_running()  # its address is what the sandbox hides
        for k, v in pool.env.items():
            os.environ.setdefault(k, v)
        pairs = [ctx.Pipe() for _ in range(pool.world_size)]
        status_in, status_out = ctx.Pipe(duplex=False)
        spec = {
            "hide": folders_to_hide(),
            "worker": {
                "world_size": pool.world_size,
                "backend": pool.backend,
                "init_method": f"tcp://127.0.0.1:{free_port()}",
                "timeout_s": pool.pg_timeout_s,
                "env": pool.env,
                "extra_handlers": pool.extra_handlers,
            },
        }
        leader = ctx.Process(target=leader_main, daemon=True, args=(spec, [c for _, c in pairs], status_out))
        leader.start()
        for _, child in pairs:
            child.close()
        status_out.close()
        # one process stands for every rank: it dies, with all of them, when any of them fails
        pool.procs, pool.conns = [leader] * pool.world_size, [p for p, _ in pairs]
        walls = _walls(status_in, pool.startup_timeout_s)
        if walls is not None and walls.up:
            pool.await_ready()
            pool.sandbox_pids = own_pids(leader.pid, walls.ranks)
            return walls
        leader.join(timeout=5)  # it ends once the process below it has: no orphan of it for the judge to adopt
        pool.kill()
        why = walls.error if walls else "its leader reported nothing"
    if mode == "require":
        raise RuntimeError(f"the candidate's sandbox: {why}")
    RankPool.start(pool)
    return Walls(error=why)


def own_pids(leader: int, ranks: list[int]) -> set[int]:
    """The sandbox's own processes as the judge sees them: the leader, the process below it, `init`, and
    the ranks (`ranks`: their PIDs inside the namespace, matched through /proc/<pid>/status NSpid)."""
    mine = {leader}
    for pid in tree([leader]):
        ns = _nspids(pid)
        if pid != leader and ns and (len(ns) == 1 or ns[1] == 1 or ns[1] in ranks):
            mine.add(pid)  # the process below the leader (not in the namespace), init (1), a rank
    return mine


def _nspids(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return [int(x) for x in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return []


def helpers(leader: int, mine: set[int]) -> list[int]:
    """The processes in the sandbox that are not its own (`mine`): what the candidate started."""
    return [p for p in tree([leader]) if p not in mine]


def reap(leader: int, mine: set[int], wait_s: float = 2.0) -> int:
    """Kill what the candidate started in its sandbox (between jobs nothing of its own runs: a process it
    left would watch the judge's pipes or load the CPU while the reference is timed); waits until they
    are gone (or zombies) for at most wait_s. Returns how many were killed."""
    killed: set[int] = set()
    deadline = time.monotonic() + wait_s
    while True:
        left = [p for p in helpers(leader, mine) if state(p) not in ("Z", "X", "")]
        if not left or time.monotonic() > deadline:
            return len(killed)
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
                killed.add(p)
            except OSError:
                pass
        time.sleep(0.005)


def _walls(conn: Any, timeout_s: float) -> Walls | None:
    try:
        if not conn.poll(timeout_s):
            return None
        data = json.loads(conn.recv_bytes())
        return Walls(**{k: data[k] for k in asdict(Walls()) if k in data})
    except (EOFError, OSError, ValueError, TypeError):
        return None
    finally:
        conn.close()
