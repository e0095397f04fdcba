"""mgbench dataset rows -> Inspect samples (one per task), with the task arguments' filters (the filters
themselves live in mgbench.taskrows, shared with the RL environment; re-exported here)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inspect_ai.dataset import MemoryDataset, Sample

from mgbench.taskrows import (  # noqa: F401  (re-exported)
    DEFAULT_DATASET,
    METADATA_KEYS,
    as_list,
    metadata_of,
    prompt_of,
    resolve_dataset,
    select_rows,
)
from mgbench.taskrows import selected as _selected  # noqa: F401  (the name tests and older code use)


def to_sample(row: dict[str, Any], backend: str) -> Sample:
    return Sample(id=row["task_id"], input=prompt_of(row, backend), metadata=metadata_of(row))


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
    spec = resolve_dataset(dataset)
    rows = select_rows(dataset, split, level, task_ids, world_size)
    return MemoryDataset([to_sample(r, backend) for r in rows], name="mgbench", location=spec)
