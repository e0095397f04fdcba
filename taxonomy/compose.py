"""Composition rules (taxonomy/compositions.yaml): which dims combine in a plan, and the mesh layout.

A plan's mesh axes: when every plan axis has size "world" the dims share one axis (e.g. Megatron
SP on the TP group); otherwise each plan axis is its own axis of a multi-dimension device mesh,
ordered outer -> inner by the pairwise `layout`s of compositions.yaml.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path
from typing import Any

from mgbench.taxonomy.model import WILDCARD, Composition, Compositions, Dim, PlanAxis, TaxonomyError

KEYS = {"dims", "layout", "share", "reason"}


def _entry(path: Path, i: int, e: dict[str, Any], dims: dict[str, Dim]) -> Composition:
    pair = e.get("dims")
    name = "/".join(map(str, pair)) if isinstance(pair, list) else f"#{i + 1}"
    where = f"{path}: entry '{name}'"
    if unknown := set(e) - KEYS:
        raise TaxonomyError(f"{where}: unknown key {sorted(unknown)[0]!r} (known: {', '.join(sorted(KEYS))})")
    if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(d, str) for d in pair)):
        raise TaxonomyError(f"{where}: 'dims' must be a list of two dim ids, got {pair!r}")
    for d in pair:
        if d != WILDCARD and d not in dims:
            raise TaxonomyError(f"{where}: unknown dimension {d!r} (known: {', '.join(sorted(dims))})")
    if pair[0] == pair[1] or pair[0] == WILDCARD:
        raise TaxonomyError(f"{where}: 'dims' must name two different dims ('*' only second)")
    layout = e.get("layout")
    if layout is not None and (not isinstance(layout, list) or sorted(layout) != sorted(pair)):
        raise TaxonomyError(f"{where}: 'layout' must list the pair's two dims outer to inner, got {layout!r}")
    if layout is not None and WILDCARD in pair:
        raise TaxonomyError(f"{where}: a wildcard pair cannot have a 'layout'")
    share = e.get("share", False)
    if not isinstance(share, bool):
        raise TaxonomyError(f"{where}: 'share' must be bool, got {type(share).__name__} {share!r}")
    reason = e.get("reason", "")
    if not isinstance(reason, str):
        raise TaxonomyError(f"{where}: 'reason' must be str, got {type(reason).__name__}")
    if layout is None and not reason.strip():
        raise TaxonomyError(f"{where}: a pair without 'layout' needs a 'reason' saying why it is forbidden")
    return Composition((pair[0], pair[1]), tuple(layout) if layout else None, share, reason.strip())


def load_compositions(path: Path, dims: dict[str, Dim], entries: list[dict[str, Any]]) -> Compositions:
    """Validate the entries of compositions.yaml (read by the loader) into Compositions."""
    rules: dict[frozenset[str], Composition] = {}
    for i, e in enumerate(entries):
        c = _entry(path, i, e, dims)
        key = frozenset(c.dims)
        if key in rules:
            raise TaxonomyError(f"{path}: entry '{'/'.join(c.dims)}': duplicate pair")
        rules[key] = c
    return Compositions(rules)


def mesh_layout(plan: list[PlanAxis], comps: Compositions) -> list[PlanAxis]:
    """The plan's separate mesh axes ordered outer -> inner ([] for a one-axis or shared-axis plan).

    Raises ValueError with the reason when a pair of the plan's dims may not combine that way."""
    if len(plan) < 2:
        return []
    shared = all(a.size == "world" for a in plan)
    for a, b in combinations([a.dim for a in plan], 2):
        rule = comps.rule(a, b)
        if rule is None:
            raise ValueError(f"forbidden composition {a} x {b}: pair not listed in compositions.yaml")
        if shared and not rule.share:
            raise ValueError(
                f"forbidden composition {a} x {b} on one shared mesh axis: "
                f"{rule.reason or 'the pair has no share: true'}"
            )
        if not shared and rule.layout is None:
            raise ValueError(f"forbidden composition {a} x {b} on separate mesh axes: {rule.reason}")
    if shared:
        return []
    inner_count = {a.dim: 0 for a in plan}  # how many other axes lie outside (before) this one
    for a, b in combinations([a.dim for a in plan], 2):
        inner_count[comps.rule(a, b).layout[1]] += 1
    order = sorted(plan, key=lambda a: inner_count[a.dim])
    if sorted(inner_count.values()) != list(range(len(plan))):
        raise ValueError(
            "the pairwise layouts of compositions.yaml do not agree on one axis order for "
            + ", ".join(a.dim for a in plan)
        )
    return order
