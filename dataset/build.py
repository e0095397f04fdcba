"""Entry point of the dataset stage: rows -> parquet shards, plots and card in a dataset folder.

The folder holds README.md (the card), data/<split>-NNNNN-of-NNNNN.parquet and plots/*.png. It is
rewritten in place: unchanged files keep their bytes, files of an older layout are deleted.
Publishing refuses a task set in which any task failed validation, naming the tasks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mgbench.dataset.card import render_card
from mgbench.dataset.plots import write_plots
from mgbench.dataset.rows import RowSet, build_rows
from mgbench.dataset.shards import MAX_SHARD_BYTES, MAX_SHARD_ROWS, SplitInfo, write_if_changed, write_shards
from mgbench.dataset.version import DatasetVersion
from mgbench.paths import REPO_ROOT


class PublishRefused(RuntimeError):
    """The task set contains tasks that failed validation (or nothing to publish)."""


@dataclass
class BuildReport:
    """What one build wrote and what it left out."""

    folder: Path
    version: DatasetVersion
    splits: dict[str, SplitInfo]
    rowset: RowSet
    plots: dict[str, str]
    lost: list[str] = field(default_factory=list)  # task ids the folder held before and lacks now

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.rowset.rows

    @property
    def files(self) -> list[str]:
        """Every file of the release, relative to the folder."""
        return ["README.md", *[f for s in self.splits.values() for f in s.files], *self.plots.values()]


def default_results_roots(out_dir: Path | str) -> list[Path]:
    """Where per-hardware results/<tag>/ folders are looked for: the repo's results/ and OUT/results."""
    committed = [REPO_ROOT / "results"] if REPO_ROOT else []  # a checkout's; an install has none
    return [*committed, Path(out_dir) / "results"]


def split_name(level: int) -> str:
    return f"level{level}"


def refusal(rowset: RowSet) -> str:
    lines = [f"refusing to publish: {len(rowset.failed)} task(s) failed validation:"]
    lines += [f"  {tid}: {why}" for tid, why in rowset.failed]
    return "\n".join(lines + ["fix or remove them (re-run `mgbench validate`), then publish again"])


def folder_task_ids(folder: Path) -> set[str]:
    """Task ids in the parquet shards a dataset folder holds now (empty for a new folder)."""
    import pyarrow.parquet as pq

    ids: set[str] = set()
    for shard in sorted((folder / "data").glob("*.parquet")):
        try:
            ids.update(pq.read_table(shard, columns=["task_id"]).column("task_id").to_pylist())
        except Exception as e:  # noqa: BLE001 - an unreadable old shard is replaced, not fatal
            print(f"warning: {shard}: unreadable old shard ({type(e).__name__}); replaced")
    return ids


def write_dataset(
    out_dir: Path | str,
    folder: Path | str,
    results_paths: Iterable[Path | str],
    results_roots: Iterable[Path | str] | None = None,
    repo_id: str | None = None,
    max_shard_rows: int = MAX_SHARD_ROWS,
    max_shard_bytes: int = MAX_SHARD_BYTES,
) -> BuildReport:
    """Build the dataset folder from OUT's manifest, validation results and GPU results."""
    roots = default_results_roots(out_dir) if results_roots is None else list(results_roots)
    rowset = build_rows(out_dir, list(results_paths), roots)
    if rowset.failed:
        raise PublishRefused(refusal(rowset))
    if not rowset.rows:
        raise PublishRefused(f"no validated task to publish from {out_dir} (run `mgbench validate`)")
    folder = Path(folder)
    before = folder_task_ids(folder)
    folder.mkdir(parents=True, exist_ok=True)
    by_split: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(rowset.rows, key=lambda r: (r["level"], r["task_id"])):
        by_split.setdefault(split_name(row["level"]), []).append(row)
    splits = write_shards(by_split, folder, max_shard_rows, max_shard_bytes)
    plots = write_plots(rowset.rows, folder)
    version = DatasetVersion.of_rows(rowset.rows)
    card = render_card(rowset.rows, splits, rowset.hardware, version, plots, repo_id)
    write_if_changed(folder / "README.md", card.encode())
    lost = sorted(before - {r["task_id"] for r in rowset.rows})
    return BuildReport(folder, version, splits, rowset, plots, lost)


def build_dataset(
    out_dir: Path | str, folder: Path | str, results_paths: Iterable[Path | str]
) -> tuple[Path, int, list[tuple[str, str]]]:
    """(folder, rows written, [(left-out task id, why)]) -- the form `mgbench build` prints."""
    rep = write_dataset(out_dir, folder, results_paths)
    return rep.folder, len(rep.rows), [(tid, "not validated") for tid in rep.rowset.not_validated]
