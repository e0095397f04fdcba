"""Run `mgbench eval` on one candidate file in a child process: the machinery the Inspect task
(mgbench.inspect_eval) and the RL reward service (mgbench.rl) share. No inspect_ai, no verifiers: anyio
and the standard library (anyio comes with mgbench's own dependencies).

This is exactly today's evaluation: the child is `python -m mgbench.cli eval --dataset ... --task ...
--solution FILE --json [--results FILE]` (`--tasks` for a generator OUT folder), so the static checks,
the fresh rank processes, the correctness trials, the timing and the record all come from
mgbench.validation.eval unchanged. The child runs in its own session; a child that outlives its deadline
is killed with its whole process group (rank processes included). Its output is drained as it comes and
only a bounded head and tail of each stream is kept, so a candidate that prints without end costs
neither memory nor disk. On NCCL each running evaluation takes `world_size` free GPUs from one pool
(CUDA_VISIBLE_DEVICES of its child), so evaluations never share a device; the caller bounds how many
run at once (`eval_slot`'s `limit`).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
from anyio.streams.text import TextReceiveStream

from mgbench.paths import child_pythonpath

# Characters of each child stream kept: the first HEAD_CHARS and the last TAIL_CHARS (the JSON record
# `mgbench eval --json` prints comes last; a record of one world size is some 10 kB).
HEAD_CHARS = 64_000
TAIL_CHARS = 2_000_000


class HarnessError(RuntimeError):
    """`mgbench eval` itself could not run (bad dataset, unknown task, ...): not the candidate's fault."""


@dataclass
class EvalSettings:
    """How the scorer, the evaluate() tool and the reward service call `mgbench eval`."""

    dataset: str  # dataset folder or Hub id; a generator OUT folder (manifest.jsonl) is passed as --tasks
    world_size: int = 2
    backend: str = "auto"  # auto | gloo | nccl (mgbench eval's --backend)
    size: str | None = None  # default: smoke on gloo, full on nccl
    trials: int = 5
    timing: bool = True
    timing_budget: float = 1.0
    min_iters: int = 50
    timeout: float | None = None  # seconds per phase (mgbench eval's --timeout)
    hardware: str | None = None
    baselines: list[str] = field(default_factory=list)
    max_evals: int | None = None  # concurrent evaluations; default from the machine
    sandbox: str = "auto"  # the candidate's ranks in namespaces of their own: auto | require | off (eval's --sandbox)

    def resolved_backend(self) -> str:
        if self.backend != "auto":
            return self.backend
        return "nccl" if visible_gpus() >= self.world_size else "gloo"

    def concurrency(self) -> int:
        """At most one evaluation per `world_size` GPUs on NCCL; on gloo one per world_size + 1 cores
        (the ranks plus the evaluating process), unless max_evals says otherwise."""
        if self.resolved_backend() == "nccl":
            fit = max(1, visible_gpus() // self.world_size)
            return min(fit, self.max_evals) if self.max_evals else fit
        if self.max_evals:
            return self.max_evals
        return max(1, (os.cpu_count() or 1) // (self.world_size + 1))

    def deadline_s(self) -> float:
        """A backstop for the whole child: mgbench eval bounds every phase itself."""
        phase = self.timeout or (300.0 if self.resolved_backend() == "nccl" else 60.0)
        timed = 5 * (phase + 3 * self.timing_budget) if self.timing else 0.0
        return 120.0 + (self.trials + 2) * phase + timed

    def source_flag(self) -> str:
        """--tasks for a generator OUT folder (it holds manifest.jsonl), else --dataset."""
        return "--tasks" if (Path(self.dataset) / "manifest.jsonl").is_file() else "--dataset"

    def command(self, task_id: str, solution: Path, results: Path | None) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "mgbench.cli",
            "eval",
            self.source_flag(),
            self.dataset,
            "--task",
            task_id,
            "--solution",
            str(solution),
            "--world-size",
            str(self.world_size),
            "--backend",
            self.resolved_backend(),
            "--trials",
            str(self.trials),
            "--budget",
            str(self.timing_budget),
            "--min-iters",
            str(self.min_iters),
            "--sandbox",
            self.sandbox,
            "--json",
        ]
        for flag, value in (
            ("--size", self.size),
            ("--timeout", self.timeout),
            ("--hardware", self.hardware),
            ("--results", results),
        ):
            if value is not None:
                cmd += [flag, str(value)]
        for b in self.baselines:
            cmd += ["--baselines", b]
        if not self.timing:
            cmd.append("--no-timing")
        return cmd


def visible_gpus() -> int:
    """CUDA devices this process may use (CUDA_VISIBLE_DEVICES, else what torch sees)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return len([d for d in env.split(",") if d.strip() and d.strip() != "-1"])
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        return 0


def gpu_ids() -> list[str]:
    """Ids of the visible CUDA devices, as CUDA_VISIBLE_DEVICES names them."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env:
        return [d.strip() for d in env.split(",") if d.strip()]
    return [str(i) for i in range(visible_gpus())]


class GpuPool:
    """The visible GPUs; an evaluation takes `n` free ones and gives them back, so evaluations of any
    world sizes (several tasks of one run) never share a device."""

    def __init__(self, ids: list[str]):
        self.free = list(ids)
        self.size = len(ids)
        self.cond = anyio.Condition()

    async def take(self, n: int) -> list[str]:
        if n > self.size:
            raise HarnessError(f"world size {n} needs {n} GPUs; {self.size} visible")
        async with self.cond:
            while len(self.free) < n:
                await self.cond.wait()
            taken, self.free = self.free[:n], self.free[n:]
            return taken

    async def give(self, ids: list[str]) -> None:
        with anyio.CancelScope(shield=True):  # a cancelled sample must not keep its GPUs
            async with self.cond:
                self.free = sorted(self.free + ids, key=lambda d: (len(d), d))
                self.cond.notify_all()


_POOL: dict[Any, GpuPool] = {}  # one per event loop; anyio primitives are loop-bound


def gpu_pool() -> GpuPool:
    token = anyio.lowlevel.current_token()
    if token not in _POOL:
        _POOL.clear()
        _POOL[token] = GpuPool(gpu_ids())
    return _POOL[token]


Limit = Callable[[], AbstractAsyncContextManager[Any]]


@asynccontextmanager
async def eval_slot(settings: EvalSettings, limit: Limit | None = None) -> AsyncIterator[dict[str, str]]:
    """Enter `limit()` (the caller's bound on concurrent evaluations); yields the environment the child
    needs (its GPUs on NCCL)."""
    async with limit() if limit else nullcontext():
        if settings.resolved_backend() != "nccl":
            yield {}
            return
        pool = gpu_pool()
        ids = await pool.take(settings.world_size)
        try:
            yield {"CUDA_VISIBLE_DEVICES": ",".join(ids)}
        finally:
            await pool.give(ids)


class Capped:
    """A stream's text as read, keeping the first `head` and the last `tail` characters."""

    def __init__(self, head: int = HEAD_CHARS, tail: int = TAIL_CHARS):
        self.head_max, self.tail_max = head, tail
        self.head: list[str] = []
        self.head_len = 0
        self.tail: list[str] = []
        self.tail_len = 0
        self.dropped = 0

    def add(self, chunk: str) -> None:
        if self.head_len < self.head_max:
            take = chunk[: self.head_max - self.head_len]
            self.head.append(take)
            self.head_len += len(take)
            chunk = chunk[len(take) :]
        if not chunk:
            return
        self.tail.append(chunk)
        self.tail_len += len(chunk)
        if self.tail_len > 2 * self.tail_max:  # compact now and then, not on every chunk
            self._trim()

    def _trim(self) -> None:
        joined = "".join(self.tail)
        cut = max(0, len(joined) - self.tail_max)
        self.dropped += cut
        self.tail = [joined[cut:]]
        self.tail_len = len(self.tail[0])

    def text(self) -> str:
        self._trim()
        gap = f"\n[... {self.dropped} characters of output dropped ...]\n" if self.dropped else ""
        return "".join(self.head) + gap + "".join(self.tail)


async def _read(stream: Any, into: Capped) -> None:
    if stream is None:
        return
    async for chunk in TextReceiveStream(stream, errors="replace"):
        into.add(chunk)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def run_child(
    cmd: list[str], env: dict[str, str], deadline_s: float, head: int = HEAD_CHARS, tail: int = TAIL_CHARS
) -> tuple[int | None, str, str]:
    """(exit code or None on the deadline, stdout, stderr) of `cmd` run in its own session; of each stream
    the first `head` and last `tail` characters are kept (the rest is read and dropped)."""
    out, err = Capped(head, tail), Capped(head, tail)
    proc = await anyio.open_process(cmd, env=env, start_new_session=True)
    timed_out = False
    try:
        with anyio.move_on_after(deadline_s) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_read, proc.stdout, out)
                tg.start_soon(_read, proc.stderr, err)
            await proc.wait()
        timed_out = scope.cancelled_caught
    finally:
        # past the deadline or cancelled (sample limit, Ctrl-C): the child and its rank processes; after a
        # normal exit: whatever the candidate left running in the child's session
        _kill_group(proc.pid)
        with anyio.CancelScope(shield=True), anyio.move_on_after(10):
            await proc.aclose()  # reap it and close its pipes
    return (None if timed_out else proc.returncode), out.text(), err.text()


def child_env(extra: dict[str, str]) -> dict[str, str]:
    path = child_pythonpath(os.environ.get("PYTHONPATH"))
    return {
        **os.environ,
        "PYTHONPATH": path,
        "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        **extra,
    }


def find_record(text: str, window: int = 1_000_000, tries: int = 2000) -> dict[str, Any] | None:
    """The JSON record that ends `text` (what `mgbench eval --json` prints last, with indent=1: one record,
    or a list of them, whose last is returned), whatever output of the candidate comes before it: the
    whole text from its first `{`, else the last `{` or `[` opening a line of the last `window`
    characters from which the rest is one JSON value."""
    decoder = json.JSONDecoder()
    first = text.find("{")
    found = _decoded(decoder, text, first) if first >= 0 else None
    if found is None:
        tail = text[-window:].rstrip()
        nxt = {c: tail.rfind(c, 0, len(tail)) for c in ("{\n", "[\n")}  # the last of each not yet tried
        for _ in range(tries):
            c = max(nxt, key=nxt.__getitem__)
            pos = nxt[c]
            if pos < 0:
                break
            nxt[c] = tail.rfind(c, 0, pos)
            found = _decoded(decoder, tail, pos)
            if found is not None:
                break
    if isinstance(found, list) and found and isinstance(found[-1], dict):
        found = found[-1]
    return found if isinstance(found, dict) and "status" in found else None


def _decoded(decoder: json.JSONDecoder, text: str, pos: int) -> Any:
    """The JSON value at `pos` if it runs to the end of `text` (trailing space aside), else None."""
    try:
        value, stop = decoder.raw_decode(text, pos)
    except json.JSONDecodeError:
        return None
    return value if not text[stop:].strip() else None


def parse_record(code: int | None, stdout: str, stderr: str, cmd: list[str], deadline_s: float) -> dict[str, Any]:
    """The JSON record `mgbench eval --json` printed; HarnessError when there is none."""
    if code is None:
        raise HarnessError(f"mgbench eval did not finish within {deadline_s:.0f}s: {' '.join(cmd)}")
    rec = find_record(stdout)
    if rec is not None:
        return rec
    last = (stderr.strip().splitlines() or ["no output"])[-1]
    raise HarnessError(f"mgbench eval exited {code} without a record: {last}")


async def evaluate_file(
    settings: EvalSettings,
    task_id: str,
    solution: Path,
    results: Path | None = None,
    limit: Limit | None = None,
    deadline_s: float | None = None,
) -> dict[str, Any]:
    """Evaluate `solution` for `task_id`; the record of `mgbench eval` (appended to `results` by the
    child itself when given, so the line is exactly what `mgbench eval --results` writes). `limit`
    bounds concurrent evaluations (see eval_slot); `deadline_s` overrides settings.deadline_s()."""
    cmd = settings.command(task_id, solution, results)
    deadline = deadline_s or settings.deadline_s()
    async with eval_slot(settings, limit) as extra:
        t0 = time.monotonic()
        code, out, err = await run_child(cmd, child_env(extra), deadline)
        wall = time.monotonic() - t0
    rec = parse_record(code, out, err, cmd, deadline)
    rec["eval_wall_s"] = round(wall, 3)  # the whole child (start-up, dataset load); not in the JSONL
    return rec


VERDICT_KEYS = (
    "status",
    "correct",
    "reason",
    "phase",
    "trials",
    "trials_passed",
    "speedup",
    "speedups",
    "noise_floor",
    "within_noise",
    "roofline_fraction",
    "flags",
    "review",
    "backend",
    "size",
    "world_size",
    "seconds",
)


def verdict(rec: dict[str, Any]) -> dict[str, Any]:
    """The part of a record a solver may see: outcome, reason, speedups and noise floor (no timings of
    single iterations, no seeds, no paths)."""
    return {k: rec.get(k) for k in VERDICT_KEYS}
