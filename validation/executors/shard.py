"""The unit of work an executor runs: a Shard (tasks or solution files at one world size), and its
result bookkeeping: which items already have a result, and the per-shard part files merged into the
JSONL store with duplicates dropped."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from mgbench.store import append_jsonl, latest_by, read_jsonl

KINDS = ("validate", "eval")


@dataclass
class Shard:
    """Items of one command kind at one world size, backend and size class, run together on one pool.

    items: task ids (validate) or solution file paths (eval). keys: the store key of each item's
    result, in the order of `items` (validate: task_id, content_hash, world_size, size, backend; eval:
    task_id, sample_hash, world_size, backend, size). A shard's part file, `<results>.parts/<name>.jsonl`,
    is named after the full item list, so a resubmitted shard resumes from it.
    """

    kind: str
    name: str
    items: list[str]
    keys: list[list[Any]]
    world_size: int
    backend: str
    size: str
    results: str  # the JSONL store the results go to
    source: str  # validate: generator OUT folder; eval: the solutions folder
    hardware: str = ""  # hardware kind wanted (SLURM constraint, Ray accelerator type)
    options: dict[str, Any] = field(default_factory=dict)  # timeout_s, seed / EvalOptions fields
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)  # eval: TaskInfo fields by task id

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"shard kind {self.kind!r}: want one of {KINDS}")
        if len(self.keys) != len(self.items):
            raise ValueError(f"shard {self.name}: {len(self.items)} items but {len(self.keys)} keys")

    @property
    def part(self) -> Path:
        return parts_dir(self.results) / f"{self.name}.jsonl"

    def only(self, items: Iterable[str]) -> Shard:
        """The same shard (same name and part file) restricted to `items`."""
        keep = set(items)
        pairs = [(i, k) for i, k in zip(self.items, self.keys) if i in keep]
        return replace(self, items=[i for i, _ in pairs], keys=[k for _, k in pairs])

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Shard:
        return cls(**json.loads(text))


def parts_dir(results: Path | str) -> Path:
    return Path(str(results) + ".parts")


def record_key(kind: str, rec: dict[str, Any]) -> tuple:
    """The store key of a result record (validation.run.result_key, validation.eval.score.result_key)."""
    if kind == "validate":
        return (rec["task_id"], rec["content_hash"], rec["world_size"], rec["size"], rec["backend"])
    return (rec["task_id"], rec["sample_hash"], rec.get("world_size"), rec.get("backend"), rec.get("size"))


def is_final(kind: str, rec: dict[str, Any], retry_failed: bool) -> bool:
    """Whether a stored result settles its item (failures and errors are retried only on request)."""
    if not retry_failed:
        return True
    return rec.get("status") == "passed" if kind == "validate" else rec.get("status") not in ("error", "timeout")


def shard_name(kind: str, world_size: int, backend: str, size: str, index: int, count: int, items: list[str]) -> str:
    digest = hashlib.sha256("\n".join(items).encode()).hexdigest()[:10]
    return f"{kind}-ws{world_size}-{backend}-{size}-{index:03d}of{count:03d}-{digest}"


def split(items: list[Any], count: int) -> list[list[Any]]:
    """Round-robin split into at most `count` non-empty lists (neighbouring tasks, often of one family
    and similar cost, land in different shards)."""
    count = max(1, min(count, len(items)))
    return [items[i::count] for i in range(count)]


def merge_parts(results: Path | str, kind: str) -> int:
    """Append the records of the part files beside `results` that the store lacks; returns how many.

    A record is appended when its key has no result in the store, or when the store's latest result
    for the key is not passed/correct and this record is newer (a retry). So merging twice, or merging
    parts of a shard that ran twice, never duplicates a settled result.
    """
    store = latest_by(results, lambda r: record_key(kind, r))
    added = 0
    for part in sorted(parts_dir(results).glob(f"{kind}-*.jsonl")):
        for rec in read_jsonl(part):
            key = record_key(kind, rec)
            old = store.get(key)
            if old is not None and (
                old.get("status") in ("passed", "correct") or rec.get("finished_at", 0) <= old.get("finished_at", 0)
            ):
                continue
            append_jsonl(results, rec)
            store[key] = rec
            added += 1
    return added


def missing(shard: Shard, done: dict[tuple, dict[str, Any]], retry_failed: bool = False) -> list[str]:
    """Items of `shard` without a settled result in `done` (a store's latest_by)."""
    out = []
    for item, key in zip(shard.items, shard.keys):
        rec = done.get(tuple(key))
        if rec is None or not is_final(shard.kind, rec, retry_failed):
            out.append(item)
    return out


def done_in(path: Path | str, kind: str) -> dict[tuple, dict[str, Any]]:
    return latest_by(path, lambda r: record_key(kind, r))
