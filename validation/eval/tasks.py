"""Where `mgbench eval` finds tasks: a generator OUT folder (manifest.jsonl) or a dataset (folder or Hub
id, read with `datasets`, imported lazily in the main process only), plus recorded baselines.

Baselines are results/<hw>/baselines.jsonl lines {task_id, content_hash, world_size, baseline,
median_ms, ..., roofline: {bound_ms, ...}, fraction_of_roofline}; the "null" line (the reference
timed against itself) carries the noise floor noise_speedup_p50/p95. Dataset rows may carry the same
entries in a `baselines` column.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mgbench.store import read_jsonl


@dataclass
class TaskInfo:
    """One task as the evaluator needs it."""

    task_id: str
    source: str
    content_hash: str = ""
    level: int = 0
    family: str = ""
    dims: list[str] = field(default_factory=list)
    tradeoffs: list[str] = field(default_factory=list)  # taxonomy/tradeoffs.yaml ids ([] in older manifests)
    dtype: str = ""
    world_sizes: list[int] = field(default_factory=list)
    tolerance: dict[str, float] | None = None
    forbid_collectives: bool = False
    baselines: list[dict[str, Any]] = field(default_factory=list)
    shape_rule: dict[str, Any] = field(default_factory=dict)  # the family's `shapes` rule (taxonomy)

    @property
    def has_oracle(self) -> bool:
        return self.level != 4 and "def oracle(" in self.source

    def published_sizes(self) -> dict[str, dict[str, Any]]:
        """The module's SIZES literal (its published size classes), read from the source without running it;
        {} when the module has none as a literal."""
        return published_sizes(self.source)

    def tags(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "family": self.family,
            "dims": self.dims,
            "tradeoffs": self.tradeoffs,
            "dtype": self.dtype,
        }


def published_sizes(source: str) -> dict[str, dict[str, Any]]:
    """The top-level `SIZES = {...}` literal of a task module's source; {} when there is none."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SIZES" for t in node.targets):
            try:
                sizes = ast.literal_eval(node.value)
            except ValueError:
                return {}
            return sizes if isinstance(sizes, dict) and all(isinstance(v, dict) for v in sizes.values()) else {}
    return {}


def _max_tolerance(tols: Iterable[dict[str, Any] | None]) -> dict[str, float] | None:
    good = [t for t in tols if t and t.get("atol_rel") is not None]
    return max(good, key=lambda t: t["atol_rel"]) if good else None


def read_baselines(paths: Iterable[Path | str]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """{(task_id, content_hash): [baseline lines]} from baselines.jsonl files; the hardware tag is
    the name of the folder holding the file unless the line names one; later lines win."""
    latest: dict[tuple, dict[str, Any]] = {}
    for p in paths:
        p = Path(p)
        for line in read_jsonl(p):
            if "task_id" not in line or "baseline" not in line:
                continue
            line = {"hardware": p.parent.name, **line}
            latest[
                (
                    line["task_id"],
                    line.get("content_hash", ""),
                    line["hardware"],
                    int(line.get("world_size", 0)),
                    line["baseline"],
                )
            ] = line
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    nulls = {k[:4]: v for k, v in latest.items() if k[4] == "null"}
    for k, line in latest.items():
        noise = nulls.get(k[:4], {})
        entry = {
            **line,
            **{
                k: line[k] if line.get(k) is not None else noise.get(k)
                for k in ("noise_speedup_p50", "noise_speedup_p95")
            },
        }
        out.setdefault(k[:2], []).append(entry)
    return out


def load_tasks_folder(out_dir: Path | str, baseline_files: Iterable[Path | str] = ()) -> dict[str, TaskInfo]:
    """Tasks of a generator OUT folder; tolerances from its validation results (largest passed)."""
    from mgbench.store import load_manifest

    out_dir = Path(out_dir)
    recs = load_manifest(out_dir)
    tols: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for f in sorted((out_dir / "results").glob("**/validation-*.jsonl")) + sorted(
        (out_dir / "results").glob("*.jsonl")
    ):
        for r in read_jsonl(f, warn=False):
            if r.get("status") == "passed" and r.get("tolerance"):
                tols.setdefault((r.get("task_id"), r.get("content_hash")), []).append(r["tolerance"])
    files = list(baseline_files) or sorted((out_dir / "results").glob("*/baselines.jsonl"))
    base = read_baselines(files)
    tasks = {}
    for r in recs:
        key = (r["task_id"], r["content_hash"])
        tasks[r["task_id"]] = TaskInfo(
            task_id=r["task_id"],
            source=Path(r["_path"]).read_text(),
            content_hash=r["content_hash"],
            level=int(r.get("level", 0)),
            family=r.get("family", ""),
            dims=list(r.get("dims", [])),
            tradeoffs=list(r.get("tradeoffs") or []),
            dtype=r.get("dtype", ""),
            world_sizes=list(r.get("world_sizes", [])),
            tolerance=_max_tolerance(tols.get(key, [])),
            forbid_collectives=bool(r.get("forbid_collectives", False)),
            baselines=base.get(key, []) + base.get((r["task_id"], ""), []),
            shape_rule=dict(r.get("shapes") or {}),
        )
    return tasks


def _row_task(row: dict[str, Any], extra: dict[tuple[str, str], list[dict[str, Any]]]) -> TaskInfo:
    tol = row.get("tolerance") or None
    if tol and tol.get("atol_rel") is None:
        tol = None
    key = (row["task_id"], row.get("content_hash", ""))
    return TaskInfo(
        task_id=row["task_id"],
        source=row["source"],
        content_hash=row.get("content_hash", ""),
        level=int(row.get("level") or 0),
        family=row.get("family", ""),
        dims=list(row.get("dims") or []),
        tradeoffs=list(row.get("tradeoffs") or []),
        dtype=row.get("dtype", ""),
        world_sizes=list(row.get("world_sizes") or []),
        tolerance=tol,
        forbid_collectives=bool(row.get("forbid_collectives") or False),
        baselines=[dict(b) for b in (row.get("baselines") or [])] + extra.get(key, []),
        shape_rule=_shape_rule(row.get("shapes")),
    )


def _shape_rule(value: Any) -> dict[str, Any]:
    """A dataset row's `shapes` column (a JSON object string; older rows have none)."""
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else {}
    return dict(value or {})


DATASET_COLUMNS = ("task_id", "source")  # what a row needs to become a TaskInfo


def load_dataset_tasks(spec: str, baseline_files: Iterable[Path | str] = ()) -> dict[str, TaskInfo]:
    """Tasks of a dataset folder or Hub id (every split)."""
    try:
        import datasets
    except ImportError:
        raise RuntimeError(
            "--dataset needs the `datasets` package (pip install datasets); "
            "on machines without it, evaluate a generator folder with --tasks OUT"
        ) from None
    try:
        ds = datasets.load_dataset(spec)
    except Exception as e:  # noqa: BLE001 - offline Hub, no such repo, unreadable files: one line, exit 2
        first = (str(e).strip().splitlines() or [""])[0][:300]
        raise RuntimeError(f"--dataset {spec}: cannot load it ({type(e).__name__}: {first})") from None
    extra = read_baselines(baseline_files)
    tasks: dict[str, TaskInfo] = {}
    for name, split in ds.items():
        lacking = [c for c in DATASET_COLUMNS if c not in split.column_names]
        if lacking:
            raise ValueError(
                f"--dataset {spec}: split {name!r} is not an mgbench dataset (no "
                f"{', '.join(repr(c) for c in lacking)} column)"
            )
        for row in split:
            tasks[row["task_id"]] = _row_task(row, extra)
    return tasks


def load_tasks(
    dataset: str | None, tasks_dir: str | None, baseline_files: Iterable[Path | str] = ()
) -> dict[str, TaskInfo]:
    if bool(dataset) == bool(tasks_dir):
        raise ValueError("give exactly one of --dataset (folder or Hub id) and --tasks (generator OUT folder)")
    if tasks_dir:
        return load_tasks_folder(tasks_dir, baseline_files)
    return load_dataset_tasks(dataset, baseline_files)


def baselines_for(task: TaskInfo, world_size: int, hardware: str | None) -> list[dict[str, Any]]:
    """The task's baselines at this world size (and hardware tag, when given) that have a time."""
    out = [
        b
        for b in task.baselines
        if int(b.get("world_size") or 0) == world_size and (hardware is None or b.get("hardware") == hardware)
    ]
    return [b for b in out if b.get("status", "ok") == "ok"]


def describe(tasks: dict[str, TaskInfo]) -> str:
    return json.dumps(sorted(tasks)[:10]) + (" ..." if len(tasks) > 10 else "")
