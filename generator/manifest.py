"""The generator's view of a manifest entry: a TaskRecord (spec, module, content hash) per task.

The manifest file itself (its lines, order, atomic rewrite, the errors of a bad line) belongs to
mgbench.store; this module converts between its entries and TaskRecords."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from mgbench.generator.spec import TaskSpec
from mgbench.store import LOCAL_KEYS


@dataclass
class TaskRecord:
    """A generated task: its spec, where its module lives (relative to the manifest) and its hash."""

    spec: dict[str, Any]
    module: str
    content_hash: str

    @property
    def task_id(self) -> str:
        return self.spec["task_id"]

    def entry(self) -> dict[str, Any]:
        """The manifest entry (mgbench.store.write_manifest writes it)."""
        return {**self.spec, "module": self.module, "content_hash": self.content_hash}

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> TaskRecord:
        """The record of an entry of mgbench.store.load_manifest."""
        spec = {k: v for k, v in entry.items() if k not in ("module", "content_hash", *LOCAL_KEYS)}
        return cls(spec, entry["module"], entry["content_hash"])


def content_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def record_for(spec: TaskSpec, module_rel: str, source: str) -> TaskRecord:
    return TaskRecord(spec.to_dict(), module_rel, content_hash(source))
