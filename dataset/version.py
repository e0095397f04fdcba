"""The dataset version: mgbench's version plus the content hash of the task set."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any


def mgbench_version() -> str:
    try:
        return version("mgbench")
    except PackageNotFoundError:
        return "0.0.0"


def task_set_hash(content_hashes: Iterable[str]) -> str:
    """sha256 over the sorted task content hashes, one per line: independent of order and splits."""
    return hashlib.sha256("".join(h + "\n" for h in sorted(content_hashes)).encode()).hexdigest()


@dataclass(frozen=True)
class DatasetVersion:
    """`0.1.0+3f9a2c1d7e4b`: the code version and the first 12 hex digits of the task-set hash."""

    code: str
    content_hash: str

    @classmethod
    def of_rows(cls, rows: list[dict[str, Any]]) -> DatasetVersion:
        return cls(mgbench_version(), task_set_hash(r["content_hash"] for r in rows))

    @property
    def short(self) -> str:
        return self.content_hash[:12]

    def __str__(self) -> str:
        return f"{self.code}+{self.short}"

    @property
    def tag(self) -> str:
        """The Hub tag of the release (git refs accept '+', URLs and shells like '-' better)."""
        return f"v{self.code}-{self.short}"
