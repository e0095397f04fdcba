"""The funnel from mined candidates to shipped level-4 tasks (`mgbench scrape report`), per repository.

Stages: candidates -> unique and license-permitted -> harness tried -> harness accepted -> gated
(a gate.jsonl decision) -> shipped. Each gated task that did not ship counts once, under the first gate
it failed (so the columns add up: gated = sum of gate rejections + shipped); `problems` counts the
distinct traced patterns (collective kinds and ops, no shapes) among the shipped tasks; `failing`
counts every gate a task fails (a tiny all-reduce wrapper fails min_work and has_compute_or_real_comm)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mgbench.report import table
from mgbench.scrapers.level4.gate import GATE_NAMES
from mgbench.scrapers.level4.select import GATE_FILE
from mgbench.store import latest_by, read_jsonl

STAGES = ["candidates", "permitted", "tried", "accepted", "gated", "shipped"]


@dataclass
class RepoFunnel:
    """One repository's counts (or the total's)."""

    repo: str
    candidates: int = 0
    permitted: int = 0  # unique and license-permitted: what the harness may try
    tried: int = 0
    accepted: int = 0
    gated: int = 0
    shipped: int = 0
    problems: int = 0
    non_library_shipped: int = 0
    rejected: dict[str, int] = field(default_factory=lambda: {g: 0 for g in GATE_NAMES})
    failing: dict[str, int] = field(default_factory=lambda: {g: 0 for g in GATE_NAMES})  # any failure


def funnel(scrape_dir: Path | str, harness_file: Path | str | None = None) -> dict[str, Any]:
    """Per-repository funnel (and total) of a scrape folder with its harness and gate results."""
    scrape_dir = Path(scrape_dir)
    cand_path = scrape_dir / "candidates.jsonl"
    if not cand_path.is_file():
        raise FileNotFoundError(f"{cand_path}: no candidates here (run `mgbench scrape local|github` first)")
    hpath = Path(harness_file) if harness_file else scrape_dir / "harness.jsonl"
    harness = latest_by(hpath, lambda r: r["id"])
    gate_path = hpath.with_name(GATE_FILE)
    decisions = {r["candidate"]: r for r in read_jsonl(gate_path)}
    repos: dict[str, RepoFunnel] = {}
    patterns: dict[str, set[str]] = {}
    with cand_path.open() as f:
        for c in map(json.loads, f):
            repo = c["provenance"]["repo"]
            row = repos.setdefault(repo, RepoFunnel(repo))
            row.candidates += 1
            row.permitted += bool(c.get("unique") and c.get("license_permitted"))
            h = harness.get(c["id"])
            if h is None:
                continue
            row.tried += 1
            row.accepted += bool(h.get("accepted") and h.get("spec"))
            d = decisions.get(c["id"])
            if d is None:
                continue
            row.gated += 1
            for g, why in (d.get("gates") or {}).items():
                row.failing[g] = row.failing.get(g, 0) + bool(why)
            if d["passed"]:
                row.shipped += 1
                row.non_library_shipped += "non_library" in d.get("tags", [])
                patterns.setdefault(repo, set()).add(d.get("pattern", ""))
            else:
                row.rejected[d["failed_gate"]] = row.rejected.get(d["failed_gate"], 0) + 1
    total = RepoFunnel("total")
    for repo, row in repos.items():
        row.problems = len(patterns.get(repo, ()))
        for k in [*STAGES, "non_library_shipped"]:
            setattr(total, k, getattr(total, k) + getattr(row, k))
        for g, n in row.rejected.items():
            total.rejected[g] = total.rejected.get(g, 0) + n
        for g, n in row.failing.items():
            total.failing[g] = total.failing.get(g, 0) + n
    total.problems = len(set().union(*patterns.values())) if patterns else 0
    return {
        "harness": str(hpath),
        "gate": str(gate_path) if gate_path.is_file() else None,
        "repos": [asdict(repos[k]) for k in sorted(repos)],
        "total": asdict(total),
    }


def funnel_table(data: dict[str, Any]) -> str:
    """The funnel as a text table: stages, each gate's rejections, shipped and distinct problems."""
    gates = list(data["total"]["rejected"])
    rows = [
        [
            r["repo"],
            *(r[s] for s in STAGES[:-1]),
            *(r["rejected"].get(g, 0) for g in gates),
            r["shipped"],
            r["problems"],
        ]
        for r in [*data["repos"], data["total"]]
    ]
    text = table(rows, ["repo", *STAGES[:-1], *(f"x {g}" for g in gates), "shipped", "problems"])
    total = data["total"]
    each = table(
        [[g, total["failing"].get(g, 0), total["rejected"].get(g, 0)] for g in gates],
        ["gate", "fails (any)", "fails first"],
    )
    note = "" if data["gate"] else f"\nno gate decisions next to {data['harness']}: run `mgbench scrape gate`"
    return (
        f"level 4 (x GATE: gated tasks whose first failed gate it is):\n{text}\n\n"
        f"each gate on its own (set gates see only the tasks passing the per-task gates):\n{each}{note}"
    )
