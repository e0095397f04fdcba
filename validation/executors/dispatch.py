"""Plan shards for a command and hand the missing ones to an executor.

The plan is deterministic (same items, same --shards: same shard names and part files), so a
resubmitted run finds each shard's partial results. Before and after running, the part files are
merged into the JSONL store (mgbench.validation.executors.shard.merge_parts); shards whose items all have
a settled result are skipped, the others are trimmed to their missing items.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mgbench.validation.executors.runner import ShardOutcome
from mgbench.validation.executors.shard import Shard, done_in, merge_parts, missing, shard_name, split

AUTO_SHARD_ITEMS = 64  # auto shard count: at least enough shards to keep this many items or fewer


class Executor(Protocol):
    name: str

    def concurrency(self, world_size: int, backend: str) -> int: ...

    def run(self, shards: list[Shard]) -> list[ShardOutcome]: ...


def shard_count(requested: int, n_items: int, concurrency: int) -> int:
    if requested > 0:
        return requested
    return max(concurrency, math.ceil(n_items / AUTO_SHARD_ITEMS))


def plan_validate(
    out: Path | str,
    results: Path | str,
    world_sizes: Iterable[int],
    backend: str,
    size: str,
    shards: int,
    concurrency: Any,
    task_ids: Iterable[str] | None = None,
    hardware: str = "",
    options: dict[str, Any] | None = None,
) -> list[Shard]:
    """Shards of `validate`: per world size, the manifest tasks supporting it, split round-robin."""
    from mgbench.store import load_manifest

    tasks = load_manifest(out)
    if task_ids:
        wanted = set(task_ids)
        tasks = [t for t in tasks if t["task_id"] in wanted]
    plan = []
    for ws in world_sizes:
        todo = [t for t in tasks if ws in t.get("world_sizes", [ws])]
        parts = split(todo, shard_count(shards, len(todo), concurrency(ws, backend)))
        for i, part in enumerate(parts):
            items = [t["task_id"] for t in part]
            plan.append(
                Shard(
                    "validate",
                    shard_name("validate", ws, backend, size, i, len(parts), items),
                    items,
                    [[t["task_id"], t["content_hash"], ws, size, backend] for t in part],
                    ws,
                    backend,
                    size,
                    str(results),
                    str(out),
                    hardware,
                    dict(options or {}),
                )
            )
    return plan


def plan_eval(
    folder: Path | str,
    tasks: dict[str, Any],
    results: Path | str,
    opts: Any,
    shards: int,
    concurrency: Any,
    retry_errors: bool = False,
    hardware: str = "",
) -> tuple[list[Shard], list[str]]:
    """Shards of `eval` batch mode: the folder's solution files split round-robin; each shard carries
    the TaskInfo of its tasks, so workers need neither the dataset nor `datasets`."""
    from mgbench.validation.eval.batch import discover
    from mgbench.validation.eval.runner import sample_hash

    pairs, warnings = discover(folder, tasks)
    ws, backend, size = opts.world_size, opts.backend, opts.size
    fields = {k: v for k, v in asdict(opts).items() if k not in ("world_size", "backend", "size")}
    plan = []
    parts = split(pairs, shard_count(shards, len(pairs), concurrency(ws, backend)))
    for i, part in enumerate(parts):
        items = [str(Path(p).resolve()) for _, p in part]
        keys = [[t.task_id, sample_hash(Path(p).read_text()), ws, backend, size] for t, p in part]
        plan.append(
            Shard(
                "eval",
                shard_name("eval", ws, backend, size, i, len(parts), [Path(x).name for x in items]),
                items,
                keys,
                ws,
                backend,
                size,
                str(results),
                str(Path(folder).resolve()),
                hardware,
                {**fields, "retry_errors": retry_errors},
                {t.task_id: asdict(t) for t, _ in part},
            )
        )
    return plan, warnings


@dataclass
class DispatchReport:
    planned: int
    skipped: int  # shards whose items all had a settled result
    outcomes: list[ShardOutcome] = field(default_factory=list)
    merged: int = 0  # records merged into the store from part files

    def failed(self) -> list[ShardOutcome]:
        return [o for o in self.outcomes if o.status not in ("ok", "submitted")]

    def summary(self) -> str:
        n = {s: sum(o.status == s for o in self.outcomes) for s in ("ok", "failed", "submitted")}
        return (
            f"{self.planned} shard(s): {self.skipped} already complete, {n['ok']} ran, {n['failed']} failed"
            + (f", {n['submitted']} submitted (re-run this command after the jobs end)" if n["submitted"] else "")
            + f"; {self.merged} result(s) merged"
        )


def dispatch(
    executor: Executor, plan: list[Shard], results: Path | str, retry_failed: bool = False, quiet: bool = False
) -> DispatchReport:
    """Run the shards of `plan` that have missing items; merge their results into `results`."""
    if not plan:
        return DispatchReport(0, 0)
    kind = plan[0].kind
    merged = merge_parts(results, kind)
    done = done_in(results, kind)
    todo = []
    for s in plan:
        left = missing(s, done, retry_failed)
        if left:
            todo.append(s.only(left))
    if not quiet:
        print(
            f"{executor.name}: {len(plan)} shard(s) planned, {len(plan) - len(todo)} already complete, "
            f"{len(todo)} to run ({sum(len(s.items) for s in todo)} item(s))",
            flush=True,
        )
    report = DispatchReport(len(plan), len(plan) - len(todo), executor.run(todo) if todo else [])
    report.merged = merged + merge_parts(results, kind)
    return report
