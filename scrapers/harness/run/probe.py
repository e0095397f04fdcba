"""Inside a sandboxed rank process: confine the process, join gloo, load the rendered candidate,
run the harness and report what happened (error, collectives traced, output fingerprints).

Imported by the forkserver (preloaded with torch); nothing here runs in the main process.
"""

from __future__ import annotations

import hashlib
import linecache
import os
import resource
import sys
import traceback
from typing import Any

import torch
import torch.distributed as dist

from mgbench import distops

# the c10d calls counted: every tensor call, the object collectives and barrier (object point-to-point and
# monitored_barrier never were); every functional collective but all_reduce_inplace and
# reduce_scatter_tensor_coalesced (never counted)
TRACED = (
    distops.tensor_calls()
    + distops.names(api=distops.C10D, kinds=(distops.COLLECTIVE,), forms=(distops.OBJECT,))
    + ("barrier",)
)
_UNCOUNTED = ("all_reduce_inplace", "reduce_scatter_tensor_coalesced")
FUNCOL = tuple(n for n in distops.names(api=distops.FUNCTIONAL) if n not in _UNCOUNTED)
BLOCKED = (
    "os.system",
    "subprocess.Popen",
    "os.fork",
    "os.forkpty",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "pty.spawn",
    "os.kill",
)
PATH_EVENTS = (
    "os.remove",
    "os.rename",
    "os.rmdir",
    "os.mkdir",
    "os.chmod",
    "os.symlink",
    "os.link",
    "os.truncate",
    "shutil.rmtree",
    "os.chown",
    "os.utime",
)
SECRET_WORDS = ("PROXY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "API_KEY", "ACCESS_KEY")
SECRET_PREFIXES = ("HF_", "HUGGING", "GITHUB_", "GH_", "AWS_", "GOOGLE_", "AZURE_", "OPENAI", "ANTHROPIC")

COUNTS = {"calls": 0}
VIOLATIONS: list[str] = []


def scrub_env(tmp: str) -> None:
    for k in list(os.environ):
        up = k.upper()
        if any(w in up for w in SECRET_WORDS) or up.startswith(SECRET_PREFIXES):
            del os.environ[k]
    os.environ.update(
        {
            "HOME": tmp,
            "TMPDIR": tmp,
            "TMP": tmp,
            "TEMP": tmp,
            "TORCHINDUCTOR_CACHE_DIR": tmp,
            "TRITON_CACHE_DIR": tmp,
            "XDG_CACHE_HOME": tmp,
            # the outcome must not depend on the machine that searches: a platform check at import
            # (`shutil.which("nvidia-smi")`, `torch.cuda.is_available()`) sees a CPU machine's answers on a
            # GPU machine too, so a task it accepts there also loads where CPU validation runs
            "PATH": tmp,
            "CUDA_VISIBLE_DEVICES": "",
        }
    )


def limit_memory(extra_mb: int) -> None:
    """Cap the address space at what the process maps now plus `extra_mb`."""
    with open("/proc/self/status") as f:
        vm = next((int(x.split()[1]) * 1024 for x in f if x.startswith("VmSize:")), 0)
    cap = vm + extra_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _inside(path: Any, root: str) -> bool:
    if isinstance(path, int):
        return True  # an already-open descriptor
    p = os.path.realpath(os.fsdecode(path))
    return p == root or p.startswith(root + os.sep) or p == "/dev/null"


def _writes(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND))


def install_audit_hook(root: str) -> None:
    """Refuse process spawning, network and file changes outside `root` (recorded, then raised)."""

    def hook(event: str, args: tuple) -> None:
        bad = None
        if (
            event == "open"
            and _writes(args[1] if len(args) > 1 else None, args[2] if len(args) > 2 else None)
            and args[0] is not None
            and not _inside(args[0], root)
        ):
            bad = f"write outside the sandbox: {args[0]!s}"
        elif event.startswith(BLOCKED):
            bad = f"forbidden operation: {event}"
        elif event in PATH_EVENTS and args and not _inside(args[0], root):
            bad = f"file change outside the sandbox: {event} {args[0]!s}"
        if bad:
            VIOLATIONS.append(bad[:200])
            raise PermissionError(f"mgbench sandbox: {bad}")

    sys.addaudithook(hook)


def _counting(fn):
    def wrapper(*a, **k):
        COUNTS["calls"] += 1
        return fn(*a, **k)

    wrapper._mg_traced = True
    return wrapper


def install_tracer() -> None:
    """Count calls of torch.distributed collectives (c10d and functional) made by the candidate."""
    from torch.distributed import _functional_collectives as funcol
    from torch.distributed import distributed_c10d as c10d

    wrapped: dict[int, Any] = {}  # one wrapper per function: `dist.isend is c10d.isend` still holds
    for mod, names in ((dist, TRACED), (c10d, TRACED), (funcol, FUNCOL)):  # (P2POp checks the identity)
        for name in names:
            fn = getattr(mod, name, None)
            if callable(fn) and not getattr(fn, "_mg_traced", False):
                setattr(mod, name, wrapped.setdefault(id(fn), _counting(fn)))


def fingerprint(out: Any) -> dict[str, Any]:
    """Hash and simple statistics of an output: zeros, float sum and max |x| over tensor leaves."""
    h, total, amax, nz, n = hashlib.sha256(), 0.0, 0.0, 0, 0
    stack = [out]
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            t = x.detach().cpu()
            h.update(str((t.dtype, tuple(t.shape))).encode())
            h.update(t.contiguous().view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
            n += 1
            if t.numel():
                d = t.double() if not t.is_complex() else t.abs().double()
                total += float(d.sum())
                amax = max(amax, float(d.abs().max()))
                nz += int((d != 0).sum())
        elif isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
        elif isinstance(x, dict):
            stack.extend(x[k] for k in sorted(x))
        else:
            h.update(repr(x).encode())
    return {"hash": h.hexdigest()[:16], "tensors": n, "sum": total, "absmax": amax, "nonzero": nz}


def describe(e: BaseException, module_file: str) -> dict[str, Any]:
    """Type, first message line and the deepest line of the candidate module that raised."""
    frames = traceback.extract_tb(e.__traceback__)
    # frames of the inlined runtime's CUDA-placement mode are pass-throughs, not the failing line
    mine = [f for f in frames if f.filename == module_file and f.name != "__torch_function__"]
    line = (mine[-1].line or linecache.getline(module_file, mine[-1].lineno)).strip() if mine else ""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return {"type": type(e).__name__, "msg": msg[:400], "line": line[:300], "in_candidate": bool(mine)}
