"""The reward service: a batch of completions -> rewards, each judged by `mgbench eval` in a child process
with the CLI's isolation (mgbench.evalchild: fresh rank processes per candidate, a deadline per child
that kills its whole process group, bounded output capture), at most `concurrency()` at a time (GPU
slots on NCCL: disjoint devices per running evaluation; a CPU budget on gloo).

    completion -> the last ```python block (mgbench.inspect_eval.extract) -> a solution file
               -> `mgbench eval --json --results FILE` in a child -> its records
               -> mgbench.rl.reward.of_records (the one scoring rule) -> Reward

A completion that kills its evaluation, hangs or floods its output costs only its own sample: the
child's deadline bounds its time, its output is drained and capped, and a child that ends without a
record it can vouch for (no record, a record its exit code contradicts, stdout and results file that
disagree) is that sample's incorrect verdict. A task id the dataset does not have, or one that does
not run at the world size asked for, is the caller's error (ValueError), never a silent 0.

    from mgbench.rl.service import RewardSettings, score_batch
    rewards = score_batch(completions, task_ids, RewardSettings(dataset="mgbench-out/dataset", trials=2))
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from mgbench.evalchild import EvalSettings, HarnessError, child_env, eval_slot, find_record, run_child, verdict
from mgbench.inspect_eval.extract import extract_code
from mgbench.rl.reward import Reward, no_code, of_records
from mgbench.validation.eval.verdict import Rules

T = TypeVar("T")
# exit codes of `mgbench eval` (mgbench/validation/eval/commands.py): 0 correct, 1 incorrect, 2 error
EXIT_CORRECT = 0
TRUSTED_KEYS = ("task_id", "sample_hash", "status", "correct", "speedup", "world_size", "roofline_fraction")


@dataclass
class RewardSettings(EvalSettings):
    """EvalSettings (how `mgbench eval` is called) plus what the service adds."""

    deadline: float | None = None  # seconds per completion for the whole child (default: deadline_s())
    rules: Rules = field(default_factory=Rules)  # how score counts (suspicious speed, CPU timings)
    work_dir: str | None = None  # where each batch's solution files go (default: the system temp folder)
    keep_files: bool = False  # keep each batch's folder (solution files, results.jsonl)
    dedupe: bool = True  # identical code for the same task in one batch is evaluated once

    def eval_settings(self) -> EvalSettings:
        return EvalSettings(**{f: getattr(self, f) for f in EvalSettings.__dataclass_fields__})


@dataclass
class Scored:
    """One completion's reward with what it rests on: the code found and the eval records."""

    reward: Reward
    code: str | None
    records: list[dict[str, Any]]
    seconds: float = 0.0  # wall time of its evaluation child (0 without code)

    def feedback(self) -> str:
        """What a solver may see of its verdict: the JSON the Inspect agent's evaluate() tool returns."""
        if self.code is None:
            return json.dumps({"status": "no code", "reason": self.reward.reason})
        return json.dumps(verdict(self.records[-1]), sort_keys=True)


def completion_text(completion: Any) -> str:
    """The text of a completion: a string, or a chat message list (the last assistant message's content,
    itself a string or a list of content parts), or one message."""
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return _content_text(completion.get("content"))
    if isinstance(completion, Sequence):
        msgs = [m for m in completion if isinstance(m, dict)]
        replies = [m for m in msgs if m.get("role", "assistant") == "assistant"] or msgs
        return _content_text(replies[-1].get("content")) if replies else ""
    content = getattr(completion, "content", None)  # a message object (verifiers, openai)
    return _content_text(content) if content is not None else str(completion)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = [p.get("text", "") if isinstance(p, dict) else getattr(p, "text", "") for p in content]
        return "".join(p for p in parts if isinstance(p, str))
    return str(content)


def task_ids_of(settings: EvalSettings) -> dict[str, list[int]]:
    """{task id: world sizes} of the settings' dataset or task folder (read in this process)."""
    from mgbench.validation.eval.tasks import load_tasks

    tasks_dir = settings.source_flag() == "--tasks"
    tasks = load_tasks(None if tasks_dir else settings.dataset, settings.dataset if tasks_dir else None)
    return {tid: list(t.world_sizes) for tid, t in tasks.items()}


class RewardService:
    """Scores completions against one dataset with one set of eval settings; reusable across batches
    and event loops (the concurrency limit is per event loop)."""

    def __init__(self, settings: RewardSettings):
        self.settings = settings
        self._eval = settings.eval_settings()
        self._tasks: dict[str, list[int]] | None = None
        self._limiters: dict[Any, anyio.CapacityLimiter] = {}
        self._lock = threading.Lock()

    # -- checks of the caller's input ------------------------------------------------------------------
    def check_tasks(self, task_ids: Sequence[str]) -> None:
        with self._lock:
            if self._tasks is None:
                self._tasks = task_ids_of(self._eval)
        ws = self.settings.world_size
        unknown = sorted({t for t in task_ids if t not in self._tasks})
        if unknown:
            raise ValueError(f"unknown task id(s) {unknown[:5]} in {self.settings.dataset}")
        wrong = sorted({t for t in task_ids if self._tasks[t] and ws not in self._tasks[t]})
        if wrong:
            raise ValueError(f"task(s) {wrong[:5]} do not run at world size {ws}")

    async def check_tasks_async(self, task_ids: Sequence[str]) -> None:
        """check_tasks off the event loop the first time (it reads the dataset)."""
        if self._tasks is None:
            await anyio.to_thread.run_sync(self.check_tasks, list(task_ids))
        else:
            self.check_tasks(task_ids)

    def _limit(self) -> anyio.CapacityLimiter:
        token = anyio.lowlevel.current_token()
        if token not in self._limiters:
            self._limiters = {token: anyio.CapacityLimiter(self._eval.concurrency())}
        return self._limiters[token]

    # -- one completion ----------------------------------------------------------------------------------
    async def evaluate(self, completion: Any, task_id: str, folder: Path | None = None) -> Scored:
        """The reward of one completion, with its code and records."""
        code = extract_code(completion_text(completion))
        if code is None:
            return Scored(no_code(), None, [])
        own = folder is None
        folder = Path(folder or tempfile.mkdtemp(prefix="mgbench-rl-", dir=self.settings.work_dir))
        try:
            records, seconds = await self._records(code, task_id, folder)
        finally:
            if own and not self.settings.keep_files:
                shutil.rmtree(folder, ignore_errors=True)
        return Scored(of_records(records, self.settings.rules), code, records, seconds)

    async def _records(self, code: str, task_id: str, folder: Path) -> tuple[list[dict[str, Any]], float]:
        """The trusted records of `code`'s evaluation and the wall time of its child."""
        folder.mkdir(parents=True, exist_ok=True)
        solution = folder / f"{task_id}.py"
        solution.write_text(code)
        results = folder / "results.jsonl"
        cmd = self._eval.command(task_id, solution, results)
        deadline = self.settings.deadline or self._eval.deadline_s()
        limit = self._limit()
        async with eval_slot(self._eval, lambda: limit) as extra:
            t0 = time.monotonic()
            code_rc, out, err = await run_child(cmd, child_env(extra), deadline)
            seconds = time.monotonic() - t0
        return trusted_records(code_rc, out, err, results, self._failed(task_id, code, deadline)), seconds

    def _failed(self, task_id: str, code: str, deadline: float) -> Callable[[str, str], dict[str, Any]]:
        def record(status: str, reason: str) -> dict[str, Any]:
            return {
                "task_id": task_id,
                "sample": f"{task_id}.py",
                "sample_hash": hashlib.sha256(code.encode()).hexdigest(),
                "status": status,
                "correct": False,
                "reason": reason.replace("{deadline}", f"{deadline:.0f}"),
                "world_size": self.settings.world_size,
                "backend": self._eval.resolved_backend(),
                "size": self.settings.size or "",
                "timing_on": self.settings.timing,
            }

        return record

    # -- batches -----------------------------------------------------------------------------------------
    async def evaluate_batch(self, completions: Sequence[Any], task_ids: Sequence[str]) -> list[Scored]:
        """Every completion scored concurrently (within the limit), in order."""
        if len(completions) != len(task_ids):
            raise ValueError(f"{len(completions)} completions but {len(task_ids)} task ids")
        await self.check_tasks_async(task_ids)
        out: list[Scored | None] = [None] * len(completions)
        batch = Path(tempfile.mkdtemp(prefix="mgbench-rl-batch-", dir=self.settings.work_dir))
        groups: dict[tuple[str, str], list[int]] = {}
        for i, (c, t) in enumerate(zip(completions, task_ids)):
            code = extract_code(completion_text(c))
            key = (t, code if code is not None and self.settings.dedupe else f"#{i}")
            groups.setdefault(key, []).append(i)

        async def one(indices: list[int]) -> None:
            first = indices[0]
            s = await self.evaluate(completions[first], task_ids[first], batch / f"{first:05d}")
            for i in indices:
                out[i] = s

        try:
            async with anyio.create_task_group() as tg:
                for indices in groups.values():
                    tg.start_soon(one, indices)
        finally:
            if not self.settings.keep_files:
                shutil.rmtree(batch, ignore_errors=True)
        return [s for s in out if s is not None]

    async def score_batch_async(self, completions: Sequence[Any], task_ids: Sequence[str]) -> list[Reward]:
        return [s.reward for s in await self.evaluate_batch(completions, task_ids)]

    def score_batch(self, completions: Sequence[Any], task_ids: Sequence[str]) -> list[Reward]:
        return run_sync(lambda: self.score_batch_async(completions, task_ids))


def trusted_records(
    code: int | None, stdout: str, stderr: str, results: Path, failed: Callable[[str, str], dict[str, Any]]
) -> list[dict[str, Any]]:
    """The records of one evaluation, if the child vouches for them: it finished before its deadline,
    wrote them to its results file, printed the same last record, and its exit code agrees with their
    correctness (exit 0 exactly when every record is correct). Anything else is one failed record:
    the candidate's verdict, never a pass (a candidate runs as the same user as the judge and can
    write to its pipes and files; docs/eval.md, "Limits")."""
    if code is None:
        return [failed("timeout", "the evaluation did not finish within {deadline}s (the service's deadline)")]
    lines = results.read_text(errors="replace").splitlines() if results.is_file() else []
    records = []
    for line in lines:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            return [failed("error", "the evaluation's results file holds a line that is not JSON")]
        if isinstance(rec, dict):
            records.append(rec)
    printed = find_record(stdout)
    if not records or printed is None:
        last = (stderr.strip().splitlines() or ["no output"])[-1][-500:]
        why = "harness: " if code == 2 and not records else ""
        return [failed("error", f"{why}mgbench eval exited {code} without a record: {last}")]
    if any(printed.get(k) != records[-1].get(k) for k in TRUSTED_KEYS):
        return [failed("error", "the evaluation's printed record and its results file disagree")]
    all_correct = all(r.get("correct") for r in records)
    if all_correct != (code == EXIT_CORRECT):
        return [failed("error", f"mgbench eval exited {code}, which its records' correctness contradicts")]
    return records


def run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine from synchronous code: on this thread when no event loop runs here, else on a
    thread of its own (a trainer calling a reward function from inside its own loop)."""

    async def main() -> T:
        return await make()

    try:
        import asyncio

        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(main)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = anyio.run(main)
        except BaseException as e:  # noqa: BLE001 - handed back to the caller's thread
            box["error"] = e

    t = threading.Thread(target=target, name="mgbench-rl-rewards")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


_SERVICES: dict[str, RewardService] = {}


def service_for(settings: RewardSettings) -> RewardService:
    """One service per distinct settings (so the task list is read once)."""
    key = repr(settings)
    if key not in _SERVICES:
        _SERVICES[key] = RewardService(settings)
    return _SERVICES[key]


async def score_batch_async(
    completions: Sequence[Any], task_ids: Sequence[str], settings: RewardSettings
) -> list[Reward]:
    """Rewards of `completions` (strings or chat message lists) for `task_ids`, in order."""
    return await service_for(settings).score_batch_async(completions, task_ids)


def score_batch(completions: Sequence[Any], task_ids: Sequence[str], settings: RewardSettings) -> list[Reward]:
    """The synchronous form of score_batch_async."""
    return service_for(settings).score_batch(completions, task_ids)


__all__ = [
    "HarnessError",
    "RewardService",
    "RewardSettings",
    "Scored",
    "completion_text",
    "run_sync",
    "score_batch",
    "score_batch_async",
    "service_for",
    "trusted_records",
]
