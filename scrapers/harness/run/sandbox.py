"""Run a rendered candidate on `ws` sandboxed gloo ranks (forked from a torch-preloaded forkserver)
with a wall-clock timeout, an address-space limit, a temporary working directory and an audit hook."""

from __future__ import annotations

import multiprocessing as mp
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mgbench.validation.pool import collect_replies, free_port

_CTX: Any = None


def context() -> Any:
    global _CTX
    if _CTX is None:
        _CTX = mp.get_context("forkserver")
        _CTX.set_forkserver_preload(["torch", "torch.distributed", "mgbench.scrapers.harness.run.child"])
    return _CTX


@dataclass
class Attempt:
    """What one run of a candidate on all ranks gave."""

    status: str  # ok | error | timeout | crashed | violation
    replies: list[dict[str, Any] | None] = field(default_factory=list)
    reason: str = ""
    seconds: float = 0.0

    def error(self) -> dict[str, Any]:
        """The most telling rank error: one raised in the candidate, not a peer's broken collective."""
        errs = [r["error"] for r in self.replies if r and not r.get("ok")]
        errs.sort(
            key=lambda e: (
                not e.get("in_candidate"),
                "Connection closed" in e.get("msg", "") or "Timed out" in e.get("msg", ""),
            )
        )
        return errs[0] if errs else {"type": self.status, "msg": self.reason, "line": "", "in_candidate": False}


def _port_taken(at: Attempt) -> bool:
    """The rendezvous port was taken by another process between its pick and rank 0's listen."""
    return any(r and not r.get("ok") and "EADDRINUSE" in r["error"].get("msg", "") for r in at.replies)


def run_ranks(
    source: str, ws: int, n: int, timeout_s: float = 10.0, mem_mb: int = 1024, grace_s: float = 1.5
) -> Attempt:
    """Run the harness in `source` on `ws` fresh rank processes (again on a new port when the port was
    taken before rank 0 listened: a race with other runs, not the candidate's failure)."""
    at = _run_ranks_once(source, ws, n, timeout_s, mem_mb, grace_s)
    return _run_ranks_once(source, ws, n, timeout_s, mem_mb, grace_s) if _port_taken(at) else at


def _run_ranks_once(source: str, ws: int, n: int, timeout_s: float, mem_mb: int, grace_s: float) -> Attempt:
    """One run on fresh rank processes; everything is killed at the end."""
    from mgbench.scrapers.harness.run.child import rank_main

    t0 = time.monotonic()
    replies, status, reason = spawn_ranks(rank_main, ws, source, n, timeout_s, mem_mb, grace_s)
    if status == "timeout":
        reason = f"timed out after {timeout_s:.0f}s"
    viol = [v for x in replies if x for v in x.get("violations", [])]
    if viol:
        status, reason = "violation", viol[0]
    elif status == "ok" and any(x is None or not x["ok"] for x in replies):
        status = "error"
        if all(x is None for x in replies):
            status = "timeout" if not reason else status
    return Attempt(status, replies, reason, time.monotonic() - t0)


def spawn_ranks(
    target: Callable[..., None],
    ws: int,
    source: str,
    payload: Any,
    timeout_s: float,
    mem_mb: int,
    grace_s: float = 1.5,
    prefix: str = "mgbench-harness-",
) -> tuple[list[dict[str, Any] | None], str, str]:
    """Run `target(rank, ws, port, source, payload, conn, tmp, timeout_s, mem_mb)` on `ws` fresh processes of
    the sandbox context sharing one temporary folder: (replies, status, reason) once every rank replied or
    `timeout_s` + 5 s passed (process start, module load and input draws come first). Every process is
    killed and the folder removed at the end."""
    ctx = context()
    tmp = tempfile.mkdtemp(prefix=prefix)
    port = free_port()
    procs, conns = [], []
    try:
        for r in range(ws):
            parent, child = ctx.Pipe(duplex=False)
            p = ctx.Process(
                target=target, daemon=True, args=(r, ws, port, source, payload, child, tmp, timeout_s, mem_mb)
            )
            p.start()
            child.close()
            procs.append(p)
            conns.append(parent)
        return collect_replies(conns, procs, time.monotonic() + timeout_s + 5.0, grace_s, stop_on_crash=False)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        for p in procs:
            p.join(timeout=5)
        for c in conns:
            c.close()
        shutil.rmtree(tmp, ignore_errors=True)
