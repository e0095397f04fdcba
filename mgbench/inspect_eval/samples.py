"""mgbench dataset rows -> Inspect samples (one per task), with the task arguments' filters."""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from inspect_ai.dataset import MemoryDataset, Sample

DEFAULT_DATASET = "mgbench-out/dataset"  # what `mgbench build` writes (default --out mgbench-out)
METADATA_KEYS = (
    "task_id",
    "name",
    "level",
    "family",
    "variant",
    "dims",
    "collectives",
    "workload",
    "dtype",
    "world_sizes",
    "forbid_collectives",
    "content_hash",
)


def resolve_dataset(spec: str) -> str:
    """An absolute folder path (the scorer's child processes run elsewhere), or the Hub id as given."""
    p = Path(spec).expanduser()
    if p.exists():
        if not p.is_dir():
            raise ValueError(f"dataset {spec}: not a folder (pass a dataset folder or a Hub id)")
        return str(p.resolve())
    if spec != DEFAULT_DATASET and spec.count("/") == 1 and not spec.startswith((".", "/", "~")):
        return spec  # org/name on the Hugging Face Hub
    hint = " (run `mgbench build` first)" if spec == DEFAULT_DATASET else ""
    raise ValueError(f"dataset {spec}: folder not found{hint}; pass -T dataset=<folder or Hub id>")


def as_list(value: str | Sequence[str] | None) -> list[str]:
    """A task argument given as a list or as one comma-separated string (the CLI's -T form)."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    return [str(x).strip() for x in items if str(x).strip()]


def _selected(row: dict[str, Any], levels: list[int], patterns: list[str], world_size: int) -> bool:
    if levels and int(row["level"]) not in levels:
        return False
    if patterns and not any(fnmatch(row["task_id"], p) for p in patterns):
        return False
    return world_size in (row.get("world_sizes") or [])


def to_sample(row: dict[str, Any], backend: str) -> Sample:
    prompts = row.get("prompt") or {}
    if backend not in prompts or not prompts[backend]:
        raise ValueError(f"task {row['task_id']}: no {backend!r} prompt (the dataset has {sorted(prompts)})")
    meta = {k: row.get(k) for k in METADATA_KEYS}
    meta["dims"] = list(meta["dims"] or [])
    return Sample(id=row["task_id"], input=prompts[backend], metadata=meta)


def load_samples(
    dataset: str,
    split: str | None = None,
    level: int | str | Sequence[int] | None = None,
    task_ids: str | Sequence[str] | None = None,
    backend: str = "cuda",
    world_size: int = 2,
) -> MemoryDataset:
    """Samples of the tasks of `dataset` (folder or Hub id) that match the filters, sorted by task id.
    `task_ids` are ids or shell patterns (l2-*); tasks not supporting `world_size` are left out."""
    from mgbench.dataset.loader import load_tasks

    spec = resolve_dataset(dataset)
    levels = [int(x) for x in as_list(level if not isinstance(level, int) else str(level))]
    patterns = as_list(task_ids)
    rows = [t.row for t in load_tasks(spec, split=split)]
    picked = sorted((r for r in rows if _selected(r, levels, patterns, world_size)), key=lambda r: r["task_id"])
    if not picked:
        raise ValueError(
            f"dataset {dataset}: no task matches (split={split}, level={level}, "
            f"task_ids={task_ids}, world_size={world_size}; {len(rows)} tasks in the dataset)"
        )
    return MemoryDataset([to_sample(r, backend) for r in picked], name="mgbench", location=spec)
