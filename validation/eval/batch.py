"""Batch evaluation: a folder of solution files named <task_id>.py or <task_id>@<k>.py (several samples
per task), results appended atomically to a JSONL file, resumable by (task, sample-file hash)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mgbench.report import Progress
from mgbench.store import append_jsonl, latest_by
from mgbench.validation.eval.runner import EvalOptions, evaluate, sample_hash
from mgbench.validation.eval.score import result_key
from mgbench.validation.eval.tasks import TaskInfo


def task_of(path: Path) -> str:
    """Task id of a solution file name: '<task_id>.py' or '<task_id>@<sample>.py'."""
    return path.stem.split("@", 1)[0]


def discover(folder: Path | str, tasks: dict[str, TaskInfo]) -> tuple[list[tuple[TaskInfo, Path]], list[str]]:
    """(task, file) pairs in sorted order, and warnings for files naming no known task."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: solutions folder not found")
    pairs, warnings = [], []
    for p in sorted(folder.glob("*.py")):
        tid = task_of(p)
        if tid in tasks:
            pairs.append((tasks[tid], p))
        else:
            warnings.append(f"{p.name}: no task {tid!r} in the task set; skipped")
    return pairs, warnings


def run_batch(
    folder: Path | str,
    tasks: dict[str, TaskInfo],
    results: Path | str,
    opts: EvalOptions,
    retry_errors: bool = False,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    quiet: bool = False,
    only: set[str] | None = None,
) -> tuple[list[dict[str, Any]], int, list[str]]:
    """Evaluate every solution not already in `results`; returns (new records, skipped, warnings).
    `only`: evaluate just these file names of the folder (a shard of mgbench.validation.executors)."""
    pairs, warnings = discover(folder, tasks)
    if only is not None:
        pairs = [(t, p) for t, p in pairs if p.name in only]
    done = latest_by(results, result_key)
    todo = []
    for task, p in pairs:
        key = (task.task_id, sample_hash(p.read_text()), opts.world_size, opts.backend, opts.size)
        prev = done.get(key)
        if prev is None or (retry_errors and prev.get("status") in ("error", "timeout")):
            todo.append((task, p))
    skipped = len(pairs) - len(todo)
    prog = Progress(len(todo), "eval")
    out = []
    for task, p in todo:
        rec = evaluate(task, p, opts)
        append_jsonl(results, rec)
        out.append(rec)
        if on_result:
            on_result(rec)
        if not quiet:
            prog.step(p.name, rec["status"].upper() + (f" ({rec['reason']})" if rec["reason"] else ""))
    return out, skipped, warnings
