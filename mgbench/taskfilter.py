"""The one task filter: task ids, levels, families, dtypes and suites, as `generate`, `validate` and the GPU
pass take them (`--task`, `--level`, `--family`, `--dtype`, `--suite`).

A filter left out (None or empty) lets everything through; dtypes may be spelled long, short or by a
torch alias (bf16, bfloat16, half; mgbench.dtypes) and compare by long name, the manifest's spelling.
Standard library only: validation imports it on GPU machines that have torch and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mgbench import dtypes as _dtypes

# the record keys the filter looks at -> the filter's field
FIELDS = {"task_id": "task_ids", "level": "levels", "family": "families", "dtype": "dtypes", "suite": "suites"}
# what a record lacking a key counts as (manifests written before suites existed hold core tasks only)
DEFAULTS = {"suite": "core"}


@dataclass(frozen=True)
class TaskFilter:
    task_ids: frozenset[str] | None = None
    levels: frozenset[int] | None = None
    families: frozenset[str] | None = None
    dtypes: frozenset[str] | None = None  # long names
    suites: frozenset[str] | None = None  # "core" and peer ids (taxonomy/peers/<id>.yaml)

    @classmethod
    def of(
        cls,
        task_ids: Iterable[str] | None = None,
        levels: Iterable[int] | None = None,
        families: Iterable[str] | None = None,
        dtypes: Iterable[str] | None = None,
        suites: Iterable[str] | None = None,
    ) -> TaskFilter:
        """A filter from the command line's lists; dtypes in any spelling."""
        ids, lv, fam, dt, su = (frozenset(x) if x else None for x in (task_ids, levels, families, dtypes, suites))
        return cls(ids, lv, fam, frozenset(map(_dtypes.long_name, dt)) if dt else None, su)

    @property
    def active(self) -> bool:
        """Whether a filter narrower than a suite is given (the suite is a choice of task set, not a filter: a
        run with `--suite pkb` alone renders that whole suite)."""
        return any(getattr(self, f) for k, f in FIELDS.items() if k != "suite")

    def admits(self, **facts: Any) -> bool:
        """Whether the facts given (task_id=, level=, family=, dtype=, suite=) pass; facts not given are not
        judged."""
        for key, value in facts.items():
            allowed = getattr(self, FIELDS[key])
            if allowed and value not in allowed:
                return False
        return True

    def matches(self, record: Mapping[str, Any]) -> bool:
        """Whether a manifest record passes every filter (a record lacking a filtered key does not)."""
        return self.admits(**{key: record.get(key, DEFAULTS.get(key)) for key in FIELDS})

    def select(self, records: Iterable[Mapping[str, Any]]) -> list[Any]:
        """The records that match, in their order."""
        return [r for r in records if self.matches(r)]
