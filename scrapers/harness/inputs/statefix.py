"""Search proposals from object state read in the candidate's source (discovery/initattrs.py)."""

from __future__ import annotations

from typing import Any

from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.make.specedit import _with


def state_from_init(spec: dict[str, Any], cand: Candidate | dict[str, Any], missing: str) -> list[dict[str, Any]]:
    """On the object's first missing attribute: every attribute its `__init__` sets that the method reaches
    and that can be drawn, at once (the search's budget would otherwise go one attribute per run). The
    missing name may be none of them: a property whose getter reads a missing attribute is reported as
    missing itself."""
    init = Candidate.of(cand).init
    have = {a["name"] for a in spec["attrs"]}
    if not init or missing in have or any(nm in have for nm in init):
        return []
    return [_with(spec, lambda s: s["attrs"].extend(dict(a) for nm, a in init.items() if nm not in have))]
