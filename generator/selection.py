"""What one `generate` run regenerates, so that a filtered run updates its tasks and keeps the rest.

A run selects templated tasks by suite (default: core), level, family and dtype (no filter: all of the
suite's) and, with --mined, the level-4 tasks of a scrape folder. Records already in OUT's manifest that the selection
does not cover are kept as they are: `generate --family X` adds or updates X's tasks and never
shrinks the task set. A run that covers a record but no longer produces it (a variant removed from
the taxonomy) drops it. `replace` keeps nothing outside the selection (the old behaviour).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mgbench.generator.manifest import TaskRecord
from mgbench.store import load_manifest
from mgbench.taskfilter import TaskFilter
from mgbench.taxonomy import CORE_SUITE


@dataclass(frozen=True)
class Selection:
    tasks: TaskFilter = TaskFilter()  # the level / family / dtype filters of the templated tasks
    mined: bool = False  # the run renders level-4 tasks of a scrape folder
    templated: bool = True  # the run renders templated tasks (False: `--mined` alone)

    @classmethod
    def of(
        cls,
        levels: Iterable[int] | None,
        families: Iterable[str] | None,
        dtypes: Iterable[str] | None,
        mined: bool,
        templated: bool | None = None,
        suites: Iterable[str] = (CORE_SUITE,),
    ) -> Selection:
        tasks = TaskFilter.of(levels=levels, families=families, dtypes=dtypes, suites=suites)
        if templated is None:  # `--mined` with no filter renders the mined tasks only
            templated = not (mined and not tasks.active)
        return cls(tasks, mined, templated)

    @property
    def filtered(self) -> bool:
        """Whether the run leaves out some templated tasks of the core suite."""
        return self.tasks.active or self.tasks.suites != {CORE_SUITE} or not self.templated

    def covers(self, spec: dict[str, Any]) -> bool:
        """Whether this run regenerates the task of an existing manifest record."""
        if spec.get("template") is None:  # a mined (level-4) task
            return self.mined and self.tasks.admits(level=4)
        return self.templated and self.tasks.matches(spec)


def kept_records(manifest: Path, sel: Selection, replace: bool) -> list[TaskRecord]:
    """Records of an existing manifest outside the selection (none with `replace` or no manifest)."""
    if replace or not manifest.is_file():
        return []
    return [r for r in map(TaskRecord.from_entry, load_manifest(manifest)) if not sel.covers(r.spec)]


def kept_skips(path: Path, considered: set[str], replace: bool) -> list[dict[str, Any]]:
    """Lines of an existing skipped.jsonl for combinations this run did not consider."""
    if replace or not path.is_file():
        return []
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return [d for d in lines if d.get("task_id") not in considered]
