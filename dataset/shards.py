"""Deterministic parquet shards: data/<split>-NNNNN-of-NNNNN.parquet, cut by rows and bytes.

The same rows give byte-identical files (fixed writer options, no timestamps), and a file whose
bytes are unchanged is not rewritten, so re-publishing an unchanged set uploads nothing new.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from mgbench.dataset.schema import FEATURES

MAX_SHARD_ROWS = 1000
MAX_SHARD_BYTES = 64 * 2**20  # of row JSON, a proxy for the uncompressed size


@dataclass
class SplitInfo:
    """What the card's dataset_info needs about one split, and the files that hold it."""

    name: str
    num_examples: int
    num_bytes: int  # Arrow in-memory size, as `datasets` records it
    files: list[str] = field(default_factory=list)  # relative to the dataset folder
    download_size: int = 0  # sum of the parquet file sizes


def arrow_table(rows: list[dict[str, Any]]) -> pa.Table:
    """The rows as an Arrow table with the schema (and its `huggingface` features metadata)."""
    return pa.Table.from_pylist(rows, schema=FEATURES.arrow_schema)


def cut(
    rows: list[dict[str, Any]], max_rows: int = MAX_SHARD_ROWS, max_bytes: int = MAX_SHARD_BYTES
) -> list[list[dict[str, Any]]]:
    """Consecutive groups of rows, each within max_rows and (unless one row is bigger) max_bytes."""
    groups: list[list[dict[str, Any]]] = [[]]
    size = 0
    for row in rows:
        n = len(json.dumps(row, sort_keys=True, default=str))
        if groups[-1] and (len(groups[-1]) >= max_rows or size + n > max_bytes):
            groups.append([])
            size = 0
        groups[-1].append(row)
        size += n
    return groups if groups[0] else []


def parquet_bytes(table: pa.Table) -> bytes:
    """One parquet file in memory, with fixed options so equal tables give equal bytes."""
    buf = io.BytesIO()
    pq.write_table(
        table,
        buf,
        compression="zstd",
        compression_level=9,
        row_group_size=max(len(table), 1),
        use_dictionary=True,
        write_statistics=True,
        data_page_version="1.0",
    )
    return buf.getvalue()


def write_if_changed(path: Path, data: bytes) -> bool:
    """Write `data` atomically unless the file already holds it; True when written."""
    if path.is_file() and path.read_bytes() == data:
        return False
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return True


def write_shards(
    splits: dict[str, list[dict[str, Any]]],
    folder: Path,
    max_rows: int = MAX_SHARD_ROWS,
    max_bytes: int = MAX_SHARD_BYTES,
) -> dict[str, SplitInfo]:
    """Write every split's shards under folder/data/, delete parquet files of older layouts."""
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    infos: dict[str, SplitInfo] = {}
    for split, rows in splits.items():
        groups = cut(rows, max_rows, max_bytes)
        info = SplitInfo(split, len(rows), 0)
        for i, group in enumerate(groups):
            table = arrow_table(group)
            name = f"data/{split}-{i:05d}-of-{len(groups):05d}.parquet"
            blob = parquet_bytes(table)
            write_if_changed(folder / name, blob)
            info.files.append(name)
            info.num_bytes += table.nbytes
            info.download_size += len(blob)
        infos[split] = info
    keep = {f for i in infos.values() for f in i.files}
    for stale in data.glob("*.parquet"):
        if f"data/{stale.name}" not in keep:
            stale.unlink()
    return infos
