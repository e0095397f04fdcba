"""What runs inside the candidate's sandbox (judge/sandbox.py starts it): the leader, the namespaces,
PID 1's walls, the ranks, and the relay of their output. Linux system calls through ctypes; nothing
here holds anything of the judge's."""

from __future__ import annotations

import ctypes
import fcntl
import json
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import signal
import socket
import struct
import sys
import tempfile
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any

from mgbench.validation.eval.judge.isolate import libc_handle
from mgbench.validation.worker import worker_main

# linux/sched.h, linux/mount.h, linux/prctl.h, linux/capability.h, linux/sockios.h, linux/if.h
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 1 << 18
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 0x1, 0x2
SYS_MOUNT_SETATTR = 442  # the same number on every architecture (the unified syscall table)
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1

# Where the candidate's ranks write: the private /dev/shm (tmpfs), since every other filesystem is
# read-only inside. Caches that default to the home folder follow it.
SCRATCH = "/dev/shm"
SCRATCH_ENV = {
    "TMPDIR": SCRATCH,
    "XDG_CACHE_HOME": f"{SCRATCH}/.cache",
    "TRITON_CACHE_DIR": f"{SCRATCH}/.triton",
    "TORCH_EXTENSIONS_DIR": f"{SCRATCH}/torch_extensions",
    "TORCHINDUCTOR_CACHE_DIR": f"{SCRATCH}/torchinductor",
    "CUDA_CACHE_PATH": f"{SCRATCH}/.nv",
    "TORCHINDUCTOR_COMPILE_THREADS": "1",  # no pool of compile workers: a process left between calls dies
    "GLOO_SOCKET_IFNAME": "lo",
    "NCCL_SOCKET_IFNAME": "lo",
}


@dataclass
class Walls:
    """What the sandbox of one candidate pool closed (sent by its `init` once the ranks are forked, before
    any candidate code runs)."""

    pid: bool = False  # own PID namespace and /proc
    net: bool = False  # own network namespace, loopback up
    read_only: bool = False  # every filesystem read-only but the private scratch
    hidden: list[str] = field(default_factory=list)  # folders covered by an empty one
    no_caps: bool = False  # no capabilities left, no_new_privs
    error: str = ""  # why there is no sandbox ("" when pid and net hold)
    ranks: list[int] = field(default_factory=list)  # the ranks' PIDs inside the namespace, in rank order

    @property
    def up(self) -> bool:
        return self.pid and self.net and not self.error

    def describe(self) -> str:
        """One line for the record: what holds, or why nothing does."""
        if not self.up:
            return f"none ({self.error})"
        parts = ["pid", "net"] + (["read-only"] if self.read_only else []) + (["no-caps"] if self.no_caps else [])
        return "namespaces: " + ", ".join(parts)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def enter_namespaces(libc: ctypes.CDLL) -> None:
    """In the leader: new user (uids mapped one to one), mount, network and PID namespaces."""
    uid, gid = os.getuid(), os.getgid()
    _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID), "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


def _mount(libc: ctypes.CDLL, source: str, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    _check(
        libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags, data.encode() or None),
        f"mount {target}",
    )


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _read_only_everywhere(libc: ctypes.CDLL) -> bool:
    """Every mount of this namespace read-only (mount_setattr, Linux 5.12+); False where unsupported."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0)
    rc = libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr))
    return rc == 0


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH", b"lo", 0)))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP))


def _drop_capabilities(libc: ctypes.CDLL) -> bool:
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    for cap in range(64):  # the bounding set, so no exec can bring one back (EINVAL past the last)
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable x 2 words: all empty
    _check(libc.capset(header, data), "capset")
    return _capabilities_left() == 0


def _capabilities_left() -> int:
    """The effective capabilities of this process (from /proc/self/status), -1 if unreadable."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return -1


def build_walls(libc: ctypes.CDLL, hide: list[str]) -> Walls:
    """In `init` (PID 1 of the new namespace, with every capability there): build the walls."""
    walls = Walls()
    _mount(libc, "none", "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here propagates out
    walls.read_only = _read_only_everywhere(libc)
    _mount(libc, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    walls.pid = True
    if os.path.isdir(SCRATCH):
        _mount(libc, "tmpfs", SCRATCH, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    for folder in [f for f in hide if os.path.isdir(f)]:  # sandbox.folders_to_hide, deduplicated there
        _mount(libc, "tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=000,size=4k")
        walls.hidden.append(folder)
    _loopback_up()
    walls.net = True
    os.chdir("/")
    walls.no_caps = _drop_capabilities(libc)
    return walls


def forkserver_address() -> str:
    """The judge's fork server socket (a path, or an abstract name starting with NUL), "" if none."""
    return getattr(multiprocessing.forkserver._forkserver, "_forkserver_address", None) or ""


def leader_main(spec: dict[str, Any], conns: list[Any], status: Any) -> None:
    """Entry of the leader (a multiprocessing Process): a child of it enters the namespaces and forks
    `init`; the leader's exit mirrors init's.

    `spec`: hide (the folders to cover), worker (the arguments of worker_main but the rank
    and its pipe). `conns`: one pipe per rank. `status`: where `init` reports the Walls, once."""
    libc = libc_handle()
    middle = os.fork()  # a forked child has one thread, whatever the leader imported (unshare needs that)
    if middle == 0:
        # the judge kills the leader: everything below goes with it
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        try:
            enter_namespaces(libc)
        except OSError as e:
            _report(status, Walls(error=f"no user namespace: {e.strerror or e}"))
            os._exit(1)
        out_r, out_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # PID 1 of the new namespace
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            os.close(out_r)
            try:
                walls = build_walls(libc, spec["hide"])
            except OSError as e:
                _report(status, Walls(error=f"the sandbox could not be built: {e}"))
                os._exit(1)
            _only_own_fds(out_w, [c.fileno() for c in conns] + [status.fileno()])
            os.environ.update(SCRATCH_ENV)
            tempfile.tempdir = None  # the fork server may have cached its own; TMPDIR now says the scratch
            _run_ranks(spec, conns, status, walls)
        _close(conns, status)
        os.close(out_w)
        _relay(out_r)
        _, code = os.waitpid(pid, 0)
        os._exit(_to_init(os.waitstatus_to_exitcode(code)))
    _close(conns, status)
    _, code = os.waitpid(middle, 0)
    _exit_as(_from_init(os.waitstatus_to_exitcode(code)))


def _close(conns: list[Any], status: Any) -> None:
    for c in conns:
        c.close()
    status.close()


def _report(status: Any, walls: Walls) -> None:
    status.send_bytes(json.dumps(asdict(walls)).encode())
    status.close()


RELAY_BYTES = 1 << 20  # of the candidate's output relayed to the judge's stderr; the rest is dropped
# control bytes but tab and newline become "?": no terminal escape (clear screen, hidden text, a cursor
# moved over the judge's verdict) reaches the judge's terminal from the candidate
PRINTABLE = bytes(b if b >= 0x20 and b != 0x7F or b in (0x09, 0x0A) else 0x3F for b in range(256))


def _only_own_fds(out_w: int, keep: list[int]) -> None:
    """In `init`: close every descriptor inherited from the fork server (the judge's stdout file, the fork
    server's and resource tracker's pipes...) but the pipes to the judge (`keep`); the ranks' stdout and
    stderr become `out_w`, relayed by the process above (never the judge's stdout, where --json goes)."""
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_w, 1)
    os.dup2(out_w, 2)
    for fd in [int(f) for f in os.listdir("/proc/self/fd")]:
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    if getattr(multiprocessing.resource_tracker._resource_tracker, "_fd", None) is not None:
        multiprocessing.resource_tracker._resource_tracker._fd = None  # closed above


def _relay(fd: int) -> None:
    """Copy the candidate's output to this process's stderr (the judge's), at most RELAY_BYTES of it, with
    control bytes replaced."""
    sent = 0
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        if sent < RELAY_BYTES:
            part = chunk[: RELAY_BYTES - sent]
            sent += len(part)
            try:
                os.write(2, part.translate(PRINTABLE))
                if sent >= RELAY_BYTES:
                    os.write(2, b"\n[mgbench] the candidate's further output is dropped\n")
            except OSError:
                pass
    os.close(fd)


def _run_ranks(spec: dict[str, Any], conns: list[Any], status: Any, walls: Walls) -> None:
    """Fork one rank per pipe, report the walls and the ranks' PIDs, and wait: the first rank that fails
    ends them all with its exit code (a candidate pool is used once); orphans re-parented here (PID 1)
    are reaped on the way."""
    pids: dict[int, int] = {}
    for r, conn in enumerate(conns):
        pid = os.fork()
        if pid == 0:
            status.close()
            for other in conns:
                if other is not conn:
                    other.close()
            os._exit(_rank(r, conn, spec["worker"]))
        pids[pid] = r
    for c in conns:
        c.close()
    walls.ranks = list(pids)
    _report(status, walls)
    code = 0
    while pids:
        try:
            pid, st = os.wait()
        except ChildProcessError:
            break
        if pids.pop(pid, None) is None:
            continue  # an orphan of the candidate's
        c = os.waitstatus_to_exitcode(st)
        if c != 0:
            code = c
            break
    if code:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_to_init(code))  # PID 1 cannot kill itself with a signal: a signal travels as 128 + its number


def _rank(rank: int, conn: Any, worker: dict[str, Any]) -> int:
    code = 0
    try:
        worker_main(rank, conn=conn, **worker)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - a rank's crash is its exit code, as under multiprocessing
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def _to_init(code: int) -> int:
    return 128 - code if code < 0 else code


def _from_init(code: int) -> int:
    return -(code - 128) if code > 128 else code


def _exit_as(code: int) -> None:
    """Exit with `code` as multiprocessing reads it: a negative one is death by that signal."""
    sys.stdout.flush()
    sys.stderr.flush()
    if code < 0:
        os.kill(os.getpid(), -code)
    os._exit(code)
