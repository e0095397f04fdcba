"""Entry point of the validate stage: check every task of a manifest on a rank pool, resumably."""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mgbench import backends
from mgbench.report import Progress, table
from mgbench.store import append_jsonl, latest_by, load_manifest, manifest_file, validation_key
from mgbench.validation.contract import require_size_class
from mgbench.validation.jobs import CheckJob
from mgbench.validation.pool import RankPool, needs_cpu_group, with_cpu_group_retry

CHECKS_REQUIRED = ("inputs_deterministic", "inputs_not_mutated", "deterministic", "matches_oracle", "tolerance_sane")


@dataclass
class ValidationResult:
    """The verdict for one task at one world size, size class and backend."""

    task_id: str
    content_hash: str
    world_size: int
    size: str
    backend: str
    hardware: str
    status: str  # passed | failed
    reason: str = ""
    checks: dict[str, Any] = field(default_factory=dict)
    tolerance: dict[str, float] | None = None
    max_error: float | None = None
    seconds: float = 0.0
    seed: int = 0
    finished_at: float = 0.0
    peak_memory_bytes: list[int] | None = None  # per rank, on GPU backends: whether the ranks fit one GPU
    phase_seconds: dict[str, float] | None = None  # per phase of the checks, the slowest rank's seconds

    def key(self) -> tuple:
        return (self.task_id, self.content_hash, self.world_size, self.size, self.backend)


def verdict(outcome_results: list[dict[str, Any]], has_oracle: bool) -> tuple[str, dict[str, Any]]:
    """Reduce per-rank check results to (reason or "", aggregated checks)."""
    per_rank = [r["result"] for r in outcome_results]
    checks: dict[str, Any] = {}
    for name in CHECKS_REQUIRED:
        vals = [pr["checks"].get(name) for pr in per_rank]
        judged = [v for v in vals if v is not None]
        checks[name] = (
            None if not judged or (name == "matches_oracle" and not has_oracle) else all(bool(v) for v in judged)
        )
    checks["bitwise_deterministic"] = all(pr["checks"].get("bitwise_deterministic") for pr in per_rank)
    for kind in per_rank[0]["degenerate_pass"]:
        checks[f"rejects_{kind}"] = not all(pr["degenerate_pass"][kind] for pr in per_rank)
    for name in CHECKS_REQUIRED:
        if checks[name] is False:
            mism = next((f" ({pr['mismatch']}, rank {pr['rank']})" for pr in per_rank if pr.get("mismatch")), "")
            return f"check failed: {name}{mism if name == 'matches_oracle' else ''}", checks
    for kind in sorted(per_rank[0]["degenerate_pass"], key=lambda k: k != "input_insensitive"):
        if not checks[f"rejects_{kind}"]:
            what = (
                "outputs do not depend on the inputs"
                if kind == "input_insensitive"
                else f"a degenerate candidate ({kind}) passes the comparison"
            )
            return f"check failed: {what}", checks
    return "", checks


def check_task(
    pool: RankPool,
    t: dict[str, Any],
    size: str,
    hardware: str,
    seed: int,
    timeout_s: float,
    shape: dict[str, Any] | None = None,
) -> ValidationResult:
    """Run the correctness checks of one manifest task on a started pool; the verdict. With `shape`, at that
    held-out shape (checked under the size-class name `size`)."""
    has_oracle = t.get("level", 1) != 4
    job = CheckJob(
        path=t["_path"], content_hash=t["content_hash"], size=size, seed=seed, has_oracle=has_oracle, shape=shape
    )
    oc = pool.run(job, timeout_s)
    res = ValidationResult(
        t["task_id"],
        t["content_hash"],
        pool.world_size,
        size,
        pool.backend,
        hardware,
        "failed",
        seconds=round(oc.seconds, 3),
        seed=seed,
        finished_at=round(time.time(), 3),
    )
    if oc.status == "ok":
        reason, res.checks = verdict(oc.results, has_oracle)
        r0 = oc.results[0]["result"]
        res.tolerance, res.max_error = r0["tolerance"], r0["max_error"]
        if "peak_memory_bytes" in r0:
            res.peak_memory_bytes = [r["result"]["peak_memory_bytes"] for r in oc.results]
        if "phase_seconds" in r0:
            res.phase_seconds = {
                phase: max(r["result"].get("phase_seconds", {}).get(phase, 0.0) for r in oc.results)
                for phase in r0["phase_seconds"]
            }
        res.status, res.reason = ("failed", reason) if reason else ("passed", "")
    else:
        res.reason = f"{oc.status}: {oc.reason}"
    return res


def validate(
    manifest: Path | str,
    results: Path | str,
    world_sizes: Iterable[int] = (2,),
    backend: str = "gloo",
    size: str = "smoke",
    timeout_s: float = 60.0,
    seed: int = 0,
    task_ids: Iterable[str] | None = None,
    quiet: bool = False,
    pool_factory: Callable[..., RankPool] = RankPool,
    lift: bool = False,
) -> list[ValidationResult]:
    """Validate tasks at each world size; append results to `results`; skip what already passed.

    With `lift`, a task supporting none of `world_sizes` runs at its smallest supported world size
    (so `mgbench build` at world size 2 also validates plans that need 4 ranks).

    `pool_factory(world_size, backend, pg_timeout_s=...)` makes the rank pool (mgbench.validation.executors
    passes one whose ranks span several nodes)."""
    tasks = load_manifest(manifest)
    if task_ids:
        wanted = set(task_ids)
        tasks = [t for t in tasks if t["task_id"] in wanted]
    source = manifest_file(manifest)
    require_size_class(size, {t["task_id"]: t.get("sizes") for t in tasks}, str(source))
    done = latest_by(results, validation_key)
    hardware = _hardware(backend)
    out: list[ValidationResult] = []
    plan = _plan(tasks, list(world_sizes), lift)
    planned = {t["task_id"] for _, todo in plan for t in todo}
    unplanned = [t for t in tasks if t["task_id"] not in planned]
    if unplanned:  # said, not silently passed over
        first = unplanned[0]
        said = (
            f"{len(unplanned)} task(s) offer none of world size(s) "
            f"{', '.join(map(str, sorted(set(world_sizes))))}: not run (e.g. {first['task_id']}: "
            f"{', '.join(map(str, first.get('world_sizes', [])))})"
        )
        if not planned:  # nothing would be checked: bad input, not a pass
            raise ValueError(f"{source}: {said}")
        if not quiet:
            print(f"validate: {said}", flush=True)
    for ws, todo in plan:
        pending = [
            t
            for t in todo
            if done.get((t["task_id"], t["content_hash"], ws, size, backend), {}).get("status") != "passed"
        ]
        if not quiet:
            print(
                f"validate: world size {ws}, {backend}, size {size}: {len(pending)} to run, "
                f"{len(todo) - len(pending)} already passed",
                flush=True,
            )
        if not pending:
            continue
        prog = Progress(len(pending), f"validate ws={ws}")

        def open_pool(**kw: Any) -> RankPool:
            return pool_factory(ws, backend, pg_timeout_s=max(timeout_s * 2, 60), **kw)

        for t, res in with_cpu_group_retry(
            open_pool,
            pending,
            lambda pool, t: check_task(pool, t, size, hardware, seed, timeout_s),
            lambda t, res: t.get("level") == 4 and needs_cpu_group(backend, res.reason),
        ):
            append_jsonl(results, asdict(res))
            out.append(res)
            if not quiet:
                prog.step(t["task_id"], res.status if res.status == "passed" else f"FAILED ({res.reason})")
    return out


def _hardware(backend: str) -> str:
    """What a record says the checks ran on: the CPU for gloo, the GPU's name where ranks share GPUs."""
    if not backends.backend(backend).on_gpu:
        return platform.processor() or platform.machine()
    if backend == "shared-gpu":
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cuda"
    return "cuda"


def _plan(tasks: list[dict[str, Any]], world_sizes: list[int], lift: bool) -> list[tuple[int, list[dict[str, Any]]]]:
    """(world size, tasks to run at it), in order; lifted tasks go to their smallest world size."""
    plan = {ws: [t for t in tasks if ws in t.get("world_sizes", [ws])] for ws in world_sizes}
    if lift:
        for t in tasks:
            sizes = t.get("world_sizes") or []
            if sizes and not set(sizes) & set(world_sizes):
                plan.setdefault(min(sizes), []).append(t)
    return [(ws, todo) for ws, todo in plan.items() if todo]


def summary_table(results: list[ValidationResult]) -> str:
    by: dict[tuple, list[int]] = {}
    for r in results:
        s = by.setdefault((r.world_size, r.backend, r.size), [0, 0])
        s[0 if r.status == "passed" else 1] += 1
    rows = [(ws, b, sz, p, f) for (ws, b, sz), (p, f) in sorted(by.items())]
    return table(rows, ["world", "backend", "size", "passed", "failed"])
