"""A compact summary of what the generator skipped: world sizes (or whole tasks) and why."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from mgbench.generator.spec import Skip


def skip_summary(specs: Iterable[dict[str, Any]], skips: Iterable[Skip]) -> list[tuple[str, str, int, int, str]]:
    """Rows (family, world sizes, tasks affected, tasks dropped entirely, reason), sorted by family.

    `specs` are emitted task specs (dicts with family and skipped_world_sizes); `skips` are the
    tasks that kept no world size at all."""
    groups: dict[tuple[str, str], dict[str, set]] = defaultdict(lambda: {"ws": set(), "tasks": set(), "dropped": set()})
    for spec in specs:
        for ws, why in spec.get("skipped_world_sizes", {}).items():
            g = groups[(spec["family"], why)]
            g["ws"].add(int(ws))
            g["tasks"].add(spec["task_id"])
    for s in skips:
        for ws, why in (s.world_sizes or {0: s.reason}).items():
            g = groups[(s.family or s.task_id, why)]
            g["ws"].add(ws)
            g["tasks"].add(s.task_id)
            g["dropped"].add(s.task_id)
    return [
        (fam, ",".join(str(w) for w in sorted(g["ws"]) if w), len(g["tasks"]), len(g["dropped"]), why)
        for (fam, why), g in sorted(groups.items())
    ]


def format_skips(rows: list[tuple[str, str, int, int, str]]) -> str:
    """One line per (family, reason): `family ws=2,4: N tasks (M dropped): reason`."""
    return "\n".join(
        f"  {fam} ws={ws or '?'}: {n} task{'s' * (n != 1)}{f' ({d} dropped)' if d else ''}: {why}"
        for fam, ws, n, d, why in rows
    )
