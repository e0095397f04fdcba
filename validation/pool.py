"""A pool of rank processes started once and fed jobs; hung or desynchronized pools are restarted."""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import random
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Any

from mgbench.validation.jobs import STEP, STEP_END, Job
from mgbench.validation.worker import CPU_GLOO_VAR, worker_main

SAFE_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
    "PYTHONWARNINGS": "ignore",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
}


# An NCCL pool whose ranks also give CPU tensors a gloo backend (`cpu:gloo,cuda:nccl`, torch's default
# when no backend is named). Level-4 tasks that fail on a plain NCCL pool with NO_CPU_BACKEND run again on one.
CPU_GLOO_ENV = {CPU_GLOO_VAR: "1"}
NO_CPU_BACKEND = "No backend type associated with device type cpu"


def has_cpu_group(pool: Any) -> bool:
    """Whether `pool` was opened with CPU_GLOO_ENV (its NCCL ranks give CPU tensors gloo)."""
    return all(pool.env.get(k) == v for k, v in CPU_GLOO_ENV.items())


def needs_cpu_group(backend: str, reason: str) -> bool:
    """Whether a failure on `backend` came from CPU tensors on an NCCL-only group."""
    return backend == "nccl" and NO_CPU_BACKEND in (reason or "")


def with_cpu_group_retry(
    open_pool: Callable[..., Any],
    items: Iterable[Any],
    run_one: Callable[[Any, Any], Any],
    retry_if: Callable[[Any, Any], bool],
) -> Iterator[tuple[Any, Any]]:
    """Yield (item, run_one(pool, item)) for each item on `open_pool()`; the items whose result `retry_if`
    accepts (CPU tensors on an NCCL-only group) come last, from a second pool `open_pool(env=CPU_GLOO_ENV)`."""
    retry = []
    with open_pool() as pool:
        for item in items:
            res = run_one(pool, item)
            if retry_if(item, res):
                retry.append(item)
            else:
                yield item, res
    if retry:
        with open_pool(env=CPU_GLOO_ENV) as pool:
            for item in retry:
                yield item, run_one(pool, item)


def free_port() -> int:
    """A free TCP port: the kernel's pick, or one of MGBENCH_PORTS=LO-HI when set (mgbench.validation.executors
    gives each shard it runs at once on a node its own range, so concurrent shards never share one)."""
    span = os.environ.get("MGBENCH_PORTS")
    if not span:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    lo, hi = (int(x) for x in span.split("-"))
    first = random.randrange(lo, hi + 1)
    for i in range(hi - lo + 1):
        port = lo + (first - lo + i) % (hi - lo + 1)
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in MGBENCH_PORTS={span}")


@dataclass
class JobOutcome:
    """What came back from all ranks for one job."""

    status: str  # "ok" | "error" | "timeout" | "crashed" | "desync"
    results: list[dict[str, Any] | None]
    reason: str = ""
    seconds: float = 0.0
    steps: list[list[dict[str, Any]]] = field(default_factory=list)  # a streamed job's steps, per rank


def collect_replies(
    conns: list[Any],
    procs: list[Any],
    deadline: float,
    grace_s: float,
    stop_on_crash: bool = True,
    loads: Callable[[bytes], Any] | None = None,
    on_step: Callable[[int, dict[str, Any]], None] | None = None,
) -> tuple[list[dict[str, Any] | None], str, str]:
    """Read one reply per rank pipe until all answered or `deadline` (monotonic) passed; a rank that
    fails or dies leaves the others `grace_s` more. Returns (replies, status, reason) with status
    "ok", "timeout" (reason: the ranks that did not answer) or "crashed" (at once if stop_on_crash).
    `loads` decodes each reply's bytes (default: the pipe's own unpickling). With `on_step`, a message
    that is a step of a streamed job (`is_step`) goes to on_step(rank, message) and the rank's reply
    is still awaited."""
    replies: list[dict[str, Any] | None] = [None] * len(conns)
    pending = dict(enumerate(conns))
    status, reason = "ok", ""
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            return replies, "timeout", f"ranks {sorted(pending)} did not finish"
        for c in wait(list(pending.values()), timeout=left):
            r = next(k for k, v in pending.items() if v is c)
            try:
                if on_step is None:
                    replies[r] = c.recv() if loads is None else _reply(loads, c.recv_bytes())
                else:
                    msg = _message(loads or pickle.loads, c.recv_bytes())
                    if is_step(msg):
                        on_step(r, msg)
                        continue
                    replies[r] = msg if loads is None else _as_reply(msg)
                del pending[r]
            except (EOFError, OSError):
                del pending[r]
                procs[r].join(timeout=2)
                status, reason = "crashed", f"rank {r} process died (exit code {procs[r].exitcode})"
                if stop_on_crash:
                    return replies, status, reason
            if (replies[r] is None or not replies[r]["ok"]) and pending:
                deadline = min(deadline, time.monotonic() + grace_s)
    return replies, status, reason


def is_step(msg: Any) -> bool:
    """Whether a message from a rank is a step of a streamed job rather than its reply."""
    return type(msg) is dict and STEP in msg and "ok" not in msg


def _message(loads: Callable[[bytes], Any], raw: bytes) -> Any:
    """A message decoded by `loads`; one that fails to decode is a rank's error reply."""
    try:
        return loads(raw)
    except Exception as e:  # noqa: BLE001 - bytes a rank wrote are data, never trusted
        return {"ok": False, "error": f"ProtocolError: the reply could not be decoded ({type(e).__name__}: {e})"}


def _reply(loads: Callable[[bytes], Any], raw: bytes) -> dict[str, Any]:
    """A reply decoded by `loads`; one that fails to decode, or is no dict, is a rank's error."""
    return _as_reply(_message(loads, raw))


def _as_reply(reply: Any) -> dict[str, Any]:
    """A decoded message as a job reply; one that is not a job reply is a rank's error."""
    if type(reply) is not dict or type(reply.get("ok")) is not bool:
        return {"ok": False, "error": "ProtocolError: the reply is not a job reply"}
    if not reply["ok"] and type(reply.get("error")) is not str:
        return {"ok": False, "error": "ProtocolError: an error reply without its error"}
    if reply["ok"] and "result" in reply and type(reply["result"]) is not dict:
        return {"ok": False, "error": "ProtocolError: a result that is not a dict"}
    return reply


class RankPool:
    """`world_size` rank processes in one process group (gloo on CPU, NCCL on GPU)."""

    # Decodes replies (bytes) in this process; None: the pipe's unpickling. A pool whose ranks run
    # untrusted code sets a loader that builds plain data only.
    reply_loads: Callable[[bytes], Any] | None = None

    def __init__(
        self,
        world_size: int,
        backend: str = "gloo",
        pg_timeout_s: float = 300.0,
        startup_timeout_s: float = 120.0,
        extra_handlers: list[str] | None = None,
        env: dict[str, str] | None = None,
        start_method: str = "spawn",
    ):
        self.world_size, self.backend = world_size, backend
        self.start_method = start_method  # "forkserver" (with preloads set by the caller) starts fast
        self.pg_timeout_s, self.startup_timeout_s = pg_timeout_s, startup_timeout_s
        self.extra_handlers = list(extra_handlers or [])
        self.env = {**SAFE_ENV, **(env or {})}
        self.procs: list[Any] = []
        self.conns: list[Any] = []
        self.restarts = 0

    def __enter__(self) -> RankPool:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        ctx = mp.get_context(self.start_method)
        init = f"tcp://127.0.0.1:{free_port()}"
        for k, v in self.env.items():
            os.environ.setdefault(k, v)
        for r in range(self.world_size):
            parent, child = ctx.Pipe()
            p = ctx.Process(
                target=worker_main,
                daemon=True,
                args=(r, self.world_size, self.backend, init, child, self.pg_timeout_s, self.env, self.extra_handlers),
            )
            p.start()
            child.close()
            self.procs.append(p)
            self.conns.append(parent)
        self.await_ready()

    def await_ready(self) -> None:
        """Wait for every rank's first message (it joined the process group); a rank that does not come
        in startup_timeout_s, or dies, is an error and the pool is killed."""
        deadline = time.monotonic() + self.startup_timeout_s
        for r, c in enumerate(self.conns):
            if not c.poll(max(0.0, deadline - time.monotonic())):
                self.kill()
                raise RuntimeError(f"rank {r} did not start within {self.startup_timeout_s:.0f}s")
            try:
                c.recv() if self.reply_loads is None else _reply(self.reply_loads, c.recv_bytes())
            except EOFError:
                self.procs[r].join(timeout=5)
                code = self.procs[r].exitcode
                self.kill()
                raise RuntimeError(f"rank {r} died while starting (exit code {code})") from None

    def kill(self) -> None:
        for p in self.procs:
            if p.is_alive():
                p.kill()
        for p in self.procs:
            p.join(timeout=10)
        for c in self.conns:
            c.close()
        self.procs, self.conns = [], []

    def restart(self) -> None:
        self.kill()
        self.restarts += 1
        self.start()

    def close(self) -> None:
        for c in self.conns:
            try:
                c.send(None)
            except (BrokenPipeError, OSError):
                pass
        for p in self.procs:
            p.join(timeout=10)
        self.kill()

    def run(
        self, job: Job | list[Job], timeout_s: float, grace_s: float = 3.0, feeds: list[list[bytes]] | None = None
    ) -> JobOutcome:
        """Send a job (a mgbench.validation.jobs record: one for all ranks, or one per rank); collect the replies.

        A streamed job's steps (worker.RankContext.exchange) are answered with the rank's next message
        of `feeds` (per rank, the pickled messages that follow the job), or STEP_END once its feed is
        used up; the steps are in the outcome's `steps`. On timeout, a crash or lost synchronization the
        pool is restarted before returning.
        """
        if not self.procs:
            self.start()
        jobs = job if isinstance(job, list) else [job] * self.world_size
        steps: list[list[dict[str, Any]]] = [[] for _ in jobs]
        feeds = feeds if feeds is not None else [[] for _ in jobs]
        end = pickle.dumps(STEP_END)

        def on_step(r: int, msg: dict[str, Any]) -> None:
            steps[r].append(msg)
            n = len(steps[r])
            self.conns[r].send_bytes(feeds[r][n - 1] if n <= len(feeds[r]) else end)

        t0 = time.monotonic()
        for c, j in zip(self.conns, jobs):
            c.send(j.wire())
        results, status, reason = collect_replies(
            self.conns, self.procs, t0 + timeout_s, grace_s, loads=self.reply_loads, on_step=on_step
        )
        if status == "timeout":
            reason = f"timed out after {timeout_s:.0f}s ({reason})"
        seconds = time.monotonic() - t0
        errors = [f"rank {r}: {x['error']}" for r, x in enumerate(results) if x and not x["ok"]]
        if status == "timeout" and errors:
            status, reason = "error", errors[0]
        if status != "ok" or any(x and not x.get("in_sync", True) for x in results):
            if status == "ok":
                status, reason = ("error", errors[0]) if errors else ("desync", "ranks desynchronized after the job")
            self.restart()
            return JobOutcome(status, results, reason, seconds, steps)
        if errors:
            return JobOutcome("error", results, errors[0], seconds, steps)
        return JobOutcome("ok", results, "", seconds, steps)
