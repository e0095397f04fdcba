"""Entry point of the dataset stage: write parquet shards and the dataset card into a folder."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Iterable

from dataset.card import render_card
from dataset.rows import build_rows
from dataset.schema import FEATURES


def split_name(level: int) -> str:
    return f"level{level}"


def write_shards(rows: list[dict[str, Any]], folder: Path) -> dict[str, int]:
    """One parquet file per split: data/<split>-00000-of-00001.parquet. Returns rows per split."""
    from datasets import Dataset
    data = folder / "data"
    if data.exists():
        shutil.rmtree(data)
    data.mkdir(parents=True)
    counts: dict[str, int] = {}
    for level in sorted({r["level"] for r in rows}):
        part = [r for r in rows if r["level"] == level]
        split = split_name(level)
        Dataset.from_list(part, features=FEATURES).to_parquet(str(data / f"{split}-00000-of-00001.parquet"))
        counts[split] = len(part)
    return counts


def build_dataset(out_dir: Path | str, folder: Path | str, results_paths: Iterable[Path | str]
                  ) -> tuple[Path, int, list[tuple[str, str]]]:
    """Build the dataset folder from OUT's manifest and result files; only passed tasks go in."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rows, excluded = build_rows(out_dir, list(results_paths))
    if not rows:
        raise RuntimeError(f"no validated task to publish from {out_dir} (run `mgbench validate`)")
    counts = write_shards(rows, folder)
    (folder / "README.md").write_text(render_card(rows, counts))
    return folder, len(rows), excluded
