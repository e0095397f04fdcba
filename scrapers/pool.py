"""A process pool that runs one task per worker at a time and kills a worker past its deadline.

concurrent.futures cannot stop a running task; this pool can: a task that exceeds `timeout`
(a pathological file, a parser blow-up) costs its worker process, which is replaced, and comes
back as `TaskFailed("timeout")`. A worker that dies comes back as `TaskFailed("worker_crash")`.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any


@dataclass
class TaskFailed:
    reason: str  # timeout | worker_crash | error
    detail: str = ""


def _worker(conn: Connection, fn: Callable[[Any], Any], init: Callable[..., None] | None, initargs: tuple) -> None:
    if init is not None:
        init(*initargs)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        idx, task = msg
        try:
            out: Any = fn(task)
        except Exception as e:  # noqa: BLE001 - reported to the parent, the run goes on
            out = TaskFailed("error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"[:2000])
        try:
            conn.send((idx, out))
        except Exception as e:  # noqa: BLE001 - unpicklable result
            conn.send((idx, TaskFailed("error", f"result not sendable: {e}")))


class _Slot:
    def __init__(self, ctx: Any, fn: Callable, init: Callable | None, initargs: tuple):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, fn, init, initargs), daemon=True)
        self.proc.start()
        child.close()
        self.task: tuple[int, Any] | None = None
        self.deadline = 0.0

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()


class TimeoutPool:
    """map(fn, tasks) over `processes` workers; yields (task, result or TaskFailed) as they finish."""

    def __init__(
        self,
        fn: Callable[[Any], Any],
        processes: int = 2,
        timeout: float = 60.0,
        initializer: Callable[..., None] | None = None,
        initargs: tuple = (),
    ):
        self.fn, self.timeout = fn, timeout
        self.processes = max(1, processes)
        self.init, self.initargs = initializer, initargs
        methods = mp.get_all_start_methods()
        self.ctx = mp.get_context("fork" if "fork" in methods else "spawn")
        self.restarts = 0

    def imap_unordered(self, tasks: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        it = iter(enumerate(tasks))
        slots = [_Slot(self.ctx, self.fn, self.init, self.initargs) for _ in range(self.processes)]
        try:
            pending = True
            while True:
                for s in slots:
                    if s.task is None and pending:
                        nxt = next(it, None)
                        if nxt is None:
                            pending = False
                            break
                        s.task, s.deadline = nxt, time.monotonic() + self.timeout
                        s.conn.send(nxt)
                busy = [s for s in slots if s.task is not None]
                if not busy:
                    return
                now = time.monotonic()
                ready = wait([s.conn for s in busy], timeout=max(0.0, min(s.deadline for s in busy) - now))
                for i, s in enumerate(slots):
                    if s.task is None:
                        continue
                    if s.conn in ready:
                        try:
                            idx, out = s.conn.recv()
                        except (EOFError, OSError):
                            yield s.task[1], TaskFailed("worker_crash", f"exit code {s.proc.exitcode}")
                            slots[i] = self._replace(s)
                            continue
                        task = s.task[1]
                        s.task = None
                        yield task, out
                    elif time.monotonic() >= s.deadline:
                        yield s.task[1], TaskFailed("timeout", f"> {self.timeout:.0f}s")
                        slots[i] = self._replace(s)
        finally:
            for s in slots:
                try:
                    s.conn.send(None)
                except OSError:
                    pass
                s.proc.join(1)
                s.kill()

    def _replace(self, s: _Slot) -> _Slot:
        s.kill()
        self.restarts += 1
        return _Slot(self.ctx, self.fn, self.init, self.initargs)


def default_processes() -> int:
    return max(1, min(2, os.cpu_count() or 1))
