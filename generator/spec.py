"""Expand taxonomy families into concrete task specs (variant x scale x dtype), checking composition."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from mgbench.dtypes import SHORT as DTYPE_SHORT
from mgbench.taskfilter import TaskFilter
from mgbench.taxonomy import CORE_SUITE, Family, Taxonomy


@dataclass
class TaskSpec:
    """Everything a template needs to render one task, and the tags the dataset carries."""

    task_id: str
    family: str
    variant: str
    scale: str
    level: int
    dtype: str
    dims: list[str]
    plan: list[dict[str, Any]]
    workload: str
    realization: list[str]
    world_sizes: list[int]
    sizes: dict[str, dict[str, Any]]
    params: dict[str, Any]
    template: str
    title: str
    description: str
    forbid_collectives: bool = False
    skipped_world_sizes: dict[int, str] = field(default_factory=dict)
    mesh_layout: list[dict[str, Any]] = field(default_factory=list)  # separate mesh axes, outer -> inner
    # the family's held-out shape rule (validation/eval/shapes.py; empty: every integer size varies)
    shapes: dict[str, Any] = field(default_factory=dict)
    tradeoffs: list[str] = field(default_factory=list)  # taxonomy/tradeoffs.yaml ids; metadata, never rendered
    suite: str = CORE_SUITE  # the task set it belongs to (taxonomy.model.CORE_SUITE or a peer id); never rendered

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["skipped_world_sizes"] = {str(k): v for k, v in self.skipped_world_sizes.items()}
        return d


@dataclass
class Skip:
    """A combination the generator did not emit, and why (per world size in `world_sizes`)."""

    task_id: str
    reason: str
    family: str = ""
    world_sizes: dict[int, str] = field(default_factory=dict)


def task_id(fam: Family, variant: str, scale: str, dtype: str) -> str:
    parts = [f"l{fam.level}", fam.id]
    if variant != "base":
        parts.append(variant)
    if scale:
        parts.append(scale)
    parts.append(DTYPE_SHORT[dtype])
    return "-".join(parts)


def _sizes(fam: Family, variant_params: dict[str, Any], scale: str) -> dict[str, dict[str, Any]]:
    sizes = {cls: dict(v) for cls, v in fam.sizes.items()}
    for src in (fam.scales.get(scale, {}) if scale else {}), variant_params.get("sizes", {}):
        for cls, override in src.items():
            sizes.setdefault(cls, {}).update(override)
    return sizes


def _divisor(by: int | str | list[str], ws: int, mesh: dict[str, int]) -> int:
    """The number a size must be divisible by: an int, the world size, a mesh axis or a product of axes."""
    if isinstance(by, int):
        return by
    if by == "world":
        return ws
    return math.prod(mesh[d] for d in ([by] if isinstance(by, str) else by))


def world_size_problem(fam: Family, tax: Taxonomy, ws: int, sizes: dict[str, dict[str, Any]]) -> str | None:
    """Why `fam` with `sizes` cannot run at world size `ws`, or None if it can.

    Fixed axes must divide the world size and a "rest" axis takes the quotient; a plan of fixed
    axes only must multiply to the world size; on a multi-axis mesh no axis may be 1 (the mesh would
    degenerate to fewer dimensions); each axis must satisfy its dim's mesh constraint; and every
    `divisible` size must divide by its mesh axis (or product of axes) in every size class."""
    fixed = math.prod(a.size for a in fam.plan if isinstance(a.size, int))
    if ws % fixed:
        return f"fixed mesh sizes multiply to {fixed}, which does not divide world size {ws}"
    if fam.plan and all(isinstance(a.size, int) for a in fam.plan) and fixed != ws:
        return f"mesh of {fixed} ranks does not match world size {ws}"
    mesh = fam.mesh(ws)
    for dim, n in mesh.items():
        if n == 1 and len(fam.layout) > 1:
            return f"mesh axis {dim} would have size 1 at world size {ws} (the {len(fam.layout)}-D mesh degenerates)"
        if why := tax.dims[dim].admits(n):
            return why
    for key, by in fam.divisible.items():
        div = _divisor(by, ws, mesh)
        for cls, vals in sizes.items():
            if key not in vals:
                return f"divisible names '{key}', which size class '{cls}' lacks"
            if vals[key] % div:
                name = by if isinstance(by, (int, str)) else "*".join(by)
                return f"size {cls}.{key}={vals[key]} is not divisible by {name}={div}"
    return None


def expand(
    tax: Taxonomy,
    levels: Iterable[int] | None = None,
    families: Iterable[str] | None = None,
    dtypes: Iterable[str] | None = None,
    suites: Iterable[str] | None = (CORE_SUITE,),
) -> tuple[list[TaskSpec], list[Skip]]:
    """All task specs passing the filters (mgbench.taskfilter), sorted by id, plus the combinations skipped
    with reasons. `suites`: the task sets to expand (default the core one; None: every suite)."""
    only = TaskFilter.of(levels=levels, families=families, dtypes=dtypes, suites=suites)
    specs, skips = [], []
    for fam in sorted(tax.families.values(), key=lambda f: f.id):
        if not only.admits(level=fam.level, family=fam.id):
            continue
        for var in fam.variants:
            if not only.admits(suite=fam.suite_of(var)):
                continue
            for scale in sorted(fam.scales) or [""]:
                sizes = _sizes(fam, var.params, scale)
                for dtype in fam.dtypes:
                    if not only.admits(dtype=dtype):
                        continue
                    tid = task_id(fam, var.id, scale, dtype)
                    ok, bad = [], {}
                    for ws in sorted(fam.world_sizes):
                        why = world_size_problem(fam, tax, ws, sizes)
                        (bad.__setitem__(ws, why) if why else ok.append(ws))
                    if not ok:
                        skips.append(Skip(tid, "; ".join(f"ws={w}: {r}" for w, r in bad.items()), fam.id, bad))
                        continue
                    params = {**fam.params, **{k: v for k, v in var.params.items() if k != "sizes"}}
                    title = " / ".join(x for x in (fam.id, var.id if var.id != "base" else "", scale) if x)
                    specs.append(
                        TaskSpec(
                            task_id=tid,
                            family=fam.id,
                            variant=var.id,
                            scale=scale,
                            level=fam.level,
                            dtype=dtype,
                            dims=fam.dims,
                            plan=[{"dim": a.dim, "size": a.size} for a in fam.plan],
                            workload=fam.workload,
                            realization=fam.realization,
                            world_sizes=ok,
                            sizes=sizes,
                            params=params,
                            template=fam.template,
                            title=title,
                            description=" ".join(x for x in (fam.description, var.description) if x),
                            forbid_collectives=fam.forbid_collectives,
                            skipped_world_sizes=bad,
                            mesh_layout=[{"dim": a.dim, "size": a.size} for a in fam.layout],
                            shapes=fam.shapes,
                            tradeoffs=list(fam.tradeoffs),
                            suite=fam.suite_of(var),
                        )
                    )
    return sorted(specs, key=lambda s: s.task_id), skips
