"""Apply the gate table to every rendered level-4 task and write gate.jsonl (next to harness.jsonl).

Per-task gates first (scrapers/level4/gate.py TASK_GATES), then the set gates among the tasks that
passed them: `library_code` (a test/example/benchmark/docs copy ships only when no library task shows
the same pattern, one copy per pattern, tagged `non_library`) and `not_duplicate` (one task per traced signature:
library code first, then the shortest path, then the candidate id). gate.jsonl is rewritten whole on
each run (decisions depend on the whole set); generator/mined.py ships the records with `passed`."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mgbench.scrapers.level4.gate import GateContext, GateItem, check_task, collective_kinds, is_library_path, ranks

GATE_FILE = "gate.jsonl"
TRACE_FILE = "trace.jsonl"


@dataclass
class Decision:
    """The gate's verdict on one task (a gate.jsonl line)."""

    task_id: str
    candidate: str
    content_hash: str
    repo: str
    path: str
    passed: bool
    failed_gate: str = ""  # the first gate it failed ("" when passed)
    reason: str = ""
    gates: dict[str, str | None] = field(default_factory=dict)  # every evaluated gate: None = passed
    tags: list[str] = field(default_factory=list)
    signature: str = ""  # traced collective-and-op signature with shapes
    pattern: str = ""  # the same without shapes (what a problem is)


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def signature(item: GateItem) -> str:
    """Hash of every rank's collectives (op, dtype, shapes, in order), op counts, inputs and outputs."""
    return _digest([[r.get("collectives"), r.get("ops"), r.get("inputs"), r.get("outputs")] for r in ranks(item)])


def pattern(item: GateItem) -> str:
    """Hash of the collective kinds and the set of ops called, without shapes or counts."""
    ops = sorted({op for r in ranks(item) for op in (r.get("ops") or {})})
    return _digest([sorted(collective_kinds(item)), ops])


def _preference(item: GateItem) -> tuple:
    """Which of several duplicates ships: library code, then the shortest path, then the first id."""
    return (not is_library_path(item.path, item.role), len(item.path), item.path, item.candidate)


def decide(items: Iterable[GateItem], ctx: GateContext) -> list[Decision]:
    """Decisions for every item, in the items' order."""
    items = list(items)
    out: list[Decision] = []
    for it in items:
        gates = check_task(it, ctx)
        failed = next((k for k, v in gates.items() if v), "")
        out.append(
            Decision(
                it.task_id,
                it.candidate,
                it.content_hash,
                it.repo,
                it.path,
                not failed,
                failed,
                gates[failed] or "" if failed else "",
                gates,
                signature=signature(it) if it.trace else "",
                pattern=pattern(it) if it.trace else "",
            )
        )
    alive = [(d, it) for d, it in zip(out, items) if d.passed]
    library_patterns = {d.pattern for d, it in alive if is_library_path(it.path, it.role)}
    # of several test/example copies of a pattern no library task shows, one ships (the preferred, as for
    # duplicates): an AMD and an NVIDIA test of the same GEMM + all-reduce are one problem
    copies: dict[str, list[GateItem]] = {}
    for d, it in alive:
        if not is_library_path(it.path, it.role) and d.pattern not in library_patterns:
            copies.setdefault(d.pattern, []).append(it)
    chosen = {p: min(its, key=_preference).task_id for p, its in copies.items()}
    for d, it in alive:
        if is_library_path(it.path, it.role):
            d.gates["library_code"] = None
        elif d.pattern in library_patterns:
            _reject(d, "library_code", "test/example/benchmark/docs code whose pattern a library task ships")
        elif chosen[d.pattern] != d.task_id:
            _reject(d, "library_code", f"another test/example copy of its pattern ships ({chosen[d.pattern]})")
        else:
            d.gates["library_code"] = None
            d.tags.append("non_library")  # the only shipped copy of its pattern, tagged as such
    groups: dict[str, list[tuple[Decision, GateItem]]] = {}
    for d, it in alive:
        if d.passed:
            groups.setdefault(d.signature, []).append((d, it))
    for members in groups.values():
        members.sort(key=lambda m: _preference(m[1]))
        keep = members[0][0]
        keep.gates["not_duplicate"] = None
        for d, _ in members[1:]:
            _reject(d, "not_duplicate", f"same traced signature and shapes as {keep.task_id} (kept)")
    return out


def _reject(d: Decision, gate: str, reason: str) -> None:
    d.gates[gate] = reason
    if d.passed:
        d.passed, d.failed_gate, d.reason = False, gate, reason


def write_decisions(path: Path | str, decisions: list[Decision]) -> None:
    """Rewrite gate.jsonl whole (atomically: a reader sees the old or the new file)."""
    path = Path(path)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(asdict(d), sort_keys=True) + "\n" for d in decisions))
    os.replace(tmp, path)


def gpu_eager_ms(records: Iterable[dict[str, Any]]) -> dict[str, float]:
    """content hash -> eager median ms of the GPU records (validation's baselines.jsonl lines)."""
    out: dict[str, float] = {}
    for r in records:
        if r.get("baseline") == "eager" and r.get("status") == "ok" and r.get("median_ms") is not None:
            out[r["content_hash"]] = min(out.get(r["content_hash"], float("inf")), float(r["median_ms"]))
    return out
