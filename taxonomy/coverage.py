"""Coverage of the task set: task counts per (parallelism dim x workload) and the list of plans.

`coverage_matrix(specs)` takes task specs (generator TaskSpec objects, or dicts with the same keys,
e.g. manifest records or dataset rows: dims, workload, family, plan and optionally mesh_layout).
A task of a multi-dimension plan counts once in the row of each of its dims, so row sums exceed
the task total. `to_markdown(cov)` renders the matrix and the plan list for docs and the card.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class PlanRow:
    """One distinct plan: its mesh axes (outer -> inner), the families using it and their tasks."""

    plan: str
    axes: int
    families: list[str]
    workloads: list[str]
    tasks: int


@dataclass
class Coverage:
    dims: list[str]
    workloads: list[str]
    cells: Counter = field(default_factory=Counter)  # (dim, workload) -> tasks
    cell_families: dict = field(default_factory=dict)  # (dim, workload) -> set of family ids
    dim_tasks: Counter = field(default_factory=Counter)  # dim -> tasks that use it
    workload_tasks: Counter = field(default_factory=Counter)  # workload -> tasks
    tasks: int = 0
    plans: list[PlanRow] = field(default_factory=list)

    def count(self, dim: str, workload: str) -> int:
        return self.cells[(dim, workload)]

    def gaps(self) -> list[str]:
        """Dims that no task covers."""
        return [d for d in self.dims if not self.dim_tasks[d]]


def _get(spec: Any, key: str, default: Any = None) -> Any:
    return spec.get(key, default) if isinstance(spec, Mapping) else getattr(spec, key, default)


def plan_label(plan: Sequence[Mapping[str, Any]], layout: Sequence[Mapping[str, Any]] | None = None) -> str:
    """`tensor`, `tensor+sequence (one axis)`, or `data=rest x tensor=2` (mesh axes outer -> inner)."""
    if not plan:
        return "(none: bare collective)"
    sizes = [str(a["size"]) for a in plan]
    if len(plan) == 1:
        return plan[0]["dim"] if sizes[0] == "world" else f"{plan[0]['dim']}={sizes[0]}"
    if all(s == "world" for s in sizes):
        return "+".join(a["dim"] for a in plan) + " (one axis)"
    return " x ".join(f"{a['dim']}={a['size']}" for a in (layout or plan))


def coverage_matrix(
    specs: Iterable[Any], dims: Sequence[str] | None = None, workloads: Sequence[str] | None = None
) -> Coverage:
    """Count tasks per (dim, workload); `dims`/`workloads` fix the row/column order (and show empty
    ones), otherwise the rows and columns are those present, sorted."""
    specs = list(specs)
    present_dims = sorted({d for s in specs for d in _get(s, "dims")})
    present_wl = sorted({_get(s, "workload") for s in specs})
    cov = Coverage(list(dims) if dims else present_dims, list(workloads) if workloads else present_wl)
    cov.dims += [d for d in present_dims if d not in cov.dims]
    cov.workloads += [w for w in present_wl if w not in cov.workloads]
    plans: dict[str, dict[str, Any]] = defaultdict(lambda: {"families": set(), "workloads": set(), "tasks": 0})
    for s in specs:
        wl, fam = _get(s, "workload"), _get(s, "family")
        cov.tasks += 1
        cov.workload_tasks[wl] += 1
        for d in dict.fromkeys(_get(s, "dims")):
            cov.cells[(d, wl)] += 1
            cov.cell_families.setdefault((d, wl), set()).add(fam)
            cov.dim_tasks[d] += 1
        plan = list(_get(s, "plan") or [])
        p = plans[plan_label(plan, _get(s, "mesh_layout"))]
        p["families"].add(fam)
        p["workloads"].add(wl)
        p["tasks"] += 1
        p["axes"] = 1 if plan and all(str(a["size"]) == "world" for a in plan) else len(plan)
    cov.plans = sorted(
        (PlanRow(k, v["axes"], sorted(v["families"]), sorted(v["workloads"]), v["tasks"]) for k, v in plans.items()),
        key=lambda r: (r.axes, r.plan),
    )
    return cov


def matrix_rows(cov: Coverage, empty: str = "") -> tuple[list[str], list[list[Any]]]:
    """(header, rows) of the matrix: one row per dim plus a totals row; the last column is the
    number of tasks using the dim."""
    header = ["dim \\ workload", *cov.workloads, "tasks"]
    rows = [[d, *[cov.count(d, w) or empty for w in cov.workloads], cov.dim_tasks[d] or empty] for d in cov.dims]
    rows.append(["all tasks", *[cov.workload_tasks[w] or empty for w in cov.workloads], cov.tasks])
    return header, rows


def plan_rows(cov: Coverage, multi_only: bool = False) -> tuple[list[str], list[list[Any]]]:
    """(header, rows) of the plan list; `multi_only` keeps plans of two or more mesh axes."""
    header = ["plan (mesh axes outer -> inner)", "families", "workloads", "tasks"]
    rows = [
        [p.plan, ", ".join(p.families), ", ".join(p.workloads), p.tasks]
        for p in cov.plans
        if p.axes >= 2 or not multi_only
    ]
    return header, rows


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    esc = lambda x: str(x).replace("|", "\\|")
    lines = ["| " + " | ".join(map(esc, header)) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(esc, r)) + " |" for r in rows])


def to_markdown(cov: Coverage, heading: str = "###") -> str:
    """The coverage matrix and the plan list as Markdown (headings at level `heading`)."""
    multi = [p for p in cov.plans if p.axes >= 2]
    parts = [
        f"{heading} Coverage: tasks per parallelism dim x workload",
        f"{cov.tasks} tasks. A task counts in the row of every dim of its plan, so multi-dimension "
        "plans appear in several rows.",
        md_table(*matrix_rows(cov)),
        f"{heading} Plans",
        f"{len(cov.plans)} distinct plans, {len(multi)} of them on a multi-dimension mesh "
        f"({sum(p.tasks for p in multi)} tasks).",
        md_table(*plan_rows(cov)),
    ]
    return "\n\n".join(parts) + "\n"
