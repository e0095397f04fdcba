"""The JSONL manifest of generated tasks: one TaskRecord per line, sorted by task id."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator.spec import TaskSpec


@dataclass
class TaskRecord:
    """A generated task: its spec, where its module lives (relative to the manifest) and its hash."""
    spec: dict[str, Any]
    module: str
    content_hash: str

    @property
    def task_id(self) -> str:
        return self.spec["task_id"]

    def to_json(self) -> str:
        return json.dumps({**self.spec, "module": self.module, "content_hash": self.content_hash},
                          sort_keys=True)


def content_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def record_for(spec: TaskSpec, module_rel: str, source: str) -> TaskRecord:
    return TaskRecord(spec.to_dict(), module_rel, content_hash(source))


def write_manifest(path: Path, records: list[TaskRecord]) -> None:
    """Write the manifest atomically (temp file + rename), sorted by task id."""
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(r.to_json() + "\n" for r in sorted(records, key=lambda r: r.task_id)))
    tmp.replace(path)


def read_manifest(path: Path | str) -> list[TaskRecord]:
    """Read a manifest; a bad line gives a one-line error naming file and line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: manifest not found (run `mgbench generate` first)")
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            module, h = d.pop("module"), d.pop("content_hash")
            d["task_id"]
        except (json.JSONDecodeError, KeyError) as e:
            raise ValueError(f"{path}:{i}: bad manifest line ({type(e).__name__}: {e})") from None
        out.append(TaskRecord(d, module, h))
    return out
