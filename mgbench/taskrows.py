"""An mgbench dataset's rows -> the tasks a run asks for, with their prompts: the filters of the Inspect
task (mgbench.inspect_eval) and the RL environment (mgbench.rl) alike. Standard library only at import
(the dataset loader, which needs `datasets`, is imported when rows are read)."""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

DEFAULT_DATASET = "mgbench-out/dataset"  # what `mgbench build` writes (default --out mgbench-out)
METADATA_KEYS = (
    "task_id",
    "name",
    "level",
    "family",
    "variant",
    "dims",
    "tradeoffs",
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


def as_list(value: str | Sequence[Any] | None) -> list[str]:
    """A task argument given as a list or as one comma-separated string (the CLI's -T form)."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    return [str(x).strip() for x in items if str(x).strip()]


def as_levels(level: int | str | Sequence[int] | None) -> list[int]:
    """Levels given as one number, a comma-separated string or a list."""
    return [int(x) for x in as_list(level if not isinstance(level, int) else str(level))]


def selected(row: dict[str, Any], levels: list[int], patterns: list[str], world_size: int) -> bool:
    if levels and int(row["level"]) not in levels:
        return False
    if patterns and not any(fnmatch(row["task_id"], p) for p in patterns):
        return False
    return world_size in (row.get("world_sizes") or [])


def prompt_of(row: dict[str, Any], backend: str) -> str:
    """The rendered prompt of a row for a prompt variant (cuda, triton)."""
    prompts = row.get("prompt") or {}
    if backend not in prompts or not prompts[backend]:
        raise ValueError(f"task {row['task_id']}: no {backend!r} prompt (the dataset has {sorted(prompts)})")
    return prompts[backend]


def metadata_of(row: dict[str, Any]) -> dict[str, Any]:
    meta = {k: row.get(k) for k in METADATA_KEYS}
    meta["dims"] = list(meta["dims"] or [])
    meta["tradeoffs"] = list(meta["tradeoffs"] or [])  # absent from datasets built before the tags
    return meta


def select_rows(
    dataset: str,
    split: str | None = None,
    level: int | str | Sequence[int] | None = None,
    task_ids: str | Sequence[str] | None = None,
    world_size: int = 2,
) -> list[dict[str, Any]]:
    """The rows of the tasks of `dataset` (folder or Hub id) that match the filters, sorted by task id.
    `task_ids` are ids or shell patterns (l2-*); tasks not supporting `world_size` are left out; an
    empty selection is an error that names the filters."""
    from mgbench.dataset.loader import load_tasks

    spec = resolve_dataset(dataset)
    levels = as_levels(level)
    patterns = as_list(task_ids)
    rows = [t.row for t in load_tasks(spec, split=split)]
    picked = sorted((r for r in rows if selected(r, levels, patterns, world_size)), key=lambda r: r["task_id"])
    if not picked:
        raise ValueError(
            f"dataset {dataset}: no task matches (split={split}, level={level}, "
            f"task_ids={task_ids}, world_size={world_size}; {len(rows)} tasks in the dataset)"
        )
    return picked
