"""The gate between an accepted level-4 harness and a shipped level-4 task: a named table of gates.

Each gate has a threshold and a reason (why it exists); a task ships only when it passes every gate,
and its gate.jsonl record names the first gate it failed and why. Per-task gates look at the task's
full-size trace (scrapers/level4/trace.py) and its GPU record where one exists; set gates compare the
tasks that passed the per-task gates with each other (test copies, duplicates).

Thresholds are per rank at size "full" (the rank doing the most work counts), against the facts of
2x H200 in /work/shared/hardware/h200x2-probe.json:
- comm: 1 MiB, the smallest message of the level-1 templated tasks (their latency points, n = 524288
  bf16 elements). NCCL all-reduce on 2x H200 takes a flat 0.041-0.046 ms from 64 KiB to 1 MiB: a
  smaller message measures latency only, which level 1 already measures for every collective.
- matmul: 2^28 FLOPs (a 512 x 512 x 512 GEMM). Mined inputs are fp32; fp32 without tensor cores runs
  at ~60 TFLOP/s on an H200, so smaller products finish within one kernel launch (~5 us).
- elementwise: 2^22 elements (4 Mi): one pass reads and writes 32 MiB of fp32, ~8 us at the probe's
  4.2 TB/s device copy, just above a launch; data movement (copies, cat, index) the same 32 MiB.
- gpu_time: 0.03 ms eager median, above the fastest full call the probe measured (a 2 MB one-shot
  symmetric-memory all-reduce, 0.027 ms) = launch plus host overhead of one eager call."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mgbench import distops

MIN_COMM_BYTES = 1 << 20
MIN_MM_FLOPS = 1 << 28
MIN_ELEMENTWISE = 1 << 22
MIN_MOVED_BYTES = 1 << 25
MIN_GPU_MS = 0.03
MAX_STATISTIC_ELEMS = 64  # an output this small, with little communication and no matmul, is a statistic
MAX_HARNESS_SHARE = 0.10  # no shipped task spends more than 10% of its CPU-timed call in harness code

# dispatcher op a trace records (scrapers/level4/tracer.py) -> the taxonomy realization (level-1 families are
# keyed by these; barriers: "barrier"): every c10d op, and the functional ops named as their op is
# (all_reduce, all_gather_into_tensor, ...: not all_reduce_, broadcast_, the _out and coalesced ones)
C10D_REALIZATION = {
    name: op.realization or distops.BARRIER
    for op in distops.OPS
    for name in (*op.c10d_ops, *(n for n in op.functional_ops if n == op.name and op.form != distops.COALESCED))
}

# path components (and file name patterns) of code that is not library code
NON_LIBRARY_DIRS = frozenset(
    {
        "test",
        "tests",
        "testing",
        "unit_tests",
        "unittest",
        "examples",
        "example",
        "benchmarks",
        "benchmark",
        "bench",
        "docs",
        "doc",
        "tutorials",
        "tutorial",
    }
)
NON_LIBRARY_FILE = re.compile(r"(^test_.*|.*_test|^conftest|^bench_.*|.*_benchmark)\.py$")


@dataclass
class GateItem:
    """One rendered level-4 task with what the gates look at."""

    task_id: str
    candidate: str
    content_hash: str
    repo: str
    path: str
    role: str = ""  # the harness's role of the candidate ("test", ...)
    trace: dict[str, Any] | None = None  # its trace.jsonl record
    gpu_ms: float | None = None  # eager median on a GPU record, when one exists
    settled: bool = True  # its harness spec has a settled output (scrapers/harness/run/settle.py)
    harness_share: float | None = None  # share of its CPU-timed call in harness code, where measured
    world_sizes: tuple[int, ...] = (2, 4)  # the world sizes its harness was accepted at
    review: str | None = None  # why the curated registry does not ship it ("" when it does; None: not asked)


@dataclass(frozen=True)
class Gate:
    """A named gate: `check` returns the rejection reason, or None when the task passes."""

    name: str
    threshold: str
    reason: str
    check: Callable[[GateItem, GateContext], str | None]


@dataclass
class GateContext:
    """Facts every gate may use: the level-1 families' single realizations."""

    level1: dict[str, str] = field(default_factory=dict)  # realization -> level-1 family id


def ranks(item: GateItem) -> list[dict[str, Any]]:
    return [r for r in ((item.trace or {}).get("ranks") or []) if r]


def _peak(item: GateItem, key: str) -> int:
    return max((int(r.get(key, 0)) for r in ranks(item)), default=0)


def is_library_path(path: str, role: str = "") -> bool:
    """Whether a repository path is library code (not tests, examples, benchmarks or docs)."""
    parts = path.replace("\\", "/").split("/")
    return (
        role != "test"
        and not (set(p.lower() for p in parts[:-1]) & NON_LIBRARY_DIRS)
        and not NON_LIBRARY_FILE.match(parts[-1])
    )


def _traced(item: GateItem, ctx: GateContext) -> str | None:
    if item.trace is None:
        return "not traced (run `mgbench scrape gate`)"
    if item.trace.get("status") != "ok" or len(ranks(item)) != item.trace.get("world_size", 2):
        return f"full-size trace {item.trace.get('status')}: {item.trace.get('reason', '')[:160]}"
    return None


def _communicates(item: GateItem, ctx: GateContext) -> str | None:
    if _peak(item, "collective_calls"):
        return None
    return "no collective at full size (the call does not communicate)"


def _min_work(item: GateItem, ctx: GateContext) -> str | None:
    comm, mm = _peak(item, "comm_bytes"), _peak(item, "mm_flops")
    ew, moved = _peak(item, "elementwise_flops"), _peak(item, "moved_bytes")
    if comm >= MIN_COMM_BYTES or mm >= MIN_MM_FLOPS or ew >= MIN_ELEMENTWISE or moved >= MIN_MOVED_BYTES:
        return None
    return (
        f"too little work per rank at full size: {comm} B communicated (< {MIN_COMM_BYTES}), "
        f"{mm} matmul FLOPs (< {MIN_MM_FLOPS}), {ew} elementwise (< {MIN_ELEMENTWISE}), "
        f"{moved} B moved (< {MIN_MOVED_BYTES})"
    )


def collective_kinds(item: GateItem) -> set[str]:
    """The realizations of every collective any rank called."""
    return {C10D_REALIZATION.get(c[0], c[0]) for r in ranks(item) for c in r.get("collectives", [])}


def _has_compute_or_real_comm(item: GateItem, ctx: GateContext) -> str | None:
    kinds = collective_kinds(item) - {"barrier"}
    compute = _peak(item, "mm_flops") > 0 or _peak(item, "elementwise_flops") > _peak(item, "comm_elems")
    if compute or len(kinds) != 1:
        return None
    kind = next(iter(kinds))
    family = ctx.level1.get(kind)
    if family is None:
        return None
    return (
        f"a single-collective wrapper ({kind}) with no tensor compute (at most one pass over the "
        f"communicated data): the level-1 family {family} already is this primitive"
    )


def _output_elems(rank: dict[str, Any]) -> int:
    return max((math.prod(shape) for _dtype, shape in rank.get("outputs", [])), default=0)


def _not_a_statistic(item: GateItem, ctx: GateContext) -> str | None:
    comm, mm = _peak(item, "comm_bytes"), _peak(item, "mm_flops")
    out = max((_output_elems(r) for r in ranks(item)), default=0)
    if comm >= MIN_COMM_BYTES or mm >= MIN_MM_FLOPS or out > MAX_STATISTIC_ELEMS:
        return None
    return (
        f"a reduced statistic: outputs of <= {out} elements from local passes and {comm} B communicated, no "
        f"matmul (a metric, a norm or a min/max for logging)"
    )


def _settled_call(item: GateItem, ctx: GateContext) -> str | None:
    if item.settled:
        return None
    return "unsettled harness: its timed call would clone every input and compare them (auto path)"


def _harness_share(item: GateItem, ctx: GateContext) -> str | None:
    if item.harness_share is not None and math.isnan(item.harness_share):
        # the benchmark ran it and failed (out of memory at size full under the profiler): no measurement,
        # no certificate that the timed call measures the task
        return "harness share not measured: the share benchmark could not run the task at size full"
    if item.harness_share is None or item.harness_share <= MAX_HARNESS_SHARE:
        return None
    return (
        f"{100 * item.harness_share:.1f}% of the CPU-timed call in harness code (> "
        f"{100 * MAX_HARNESS_SHARE:.0f}%): copies of what the entry changes in place dominate the task"
    )


def _gpu_time(item: GateItem, ctx: GateContext) -> str | None:
    if item.gpu_ms is None or item.gpu_ms >= MIN_GPU_MS:
        return None
    return f"GPU eager median {item.gpu_ms:.4f} ms < {MIN_GPU_MS} ms: launch and host overhead only"


SHIPPED_WORLD_SIZES = (2, 4)  # every shipped task is accepted, validated and timed at world sizes 2 and 4


def _world_sizes(item: GateItem, ctx: GateContext) -> str | None:
    missing = [ws for ws in SHIPPED_WORLD_SIZES if ws not in item.world_sizes]
    return f"its harness runs at world size {list(item.world_sizes)} only, not {missing}" if missing else None


def review_of(entry: Any, curated: str | None) -> str:
    """Why a task's curated registry entry (scrapers/harness/curated; `entry` None when it has none) does not
    ship it, given its harness record's `curated` field; "" when the reviewed inputs were used and it ships."""
    if entry is None:
        return "no reviewed entry in scrapers/harness/curated/entries: its inputs are the harness's guesses"
    if entry.verdict != "ship":
        return f"reviewed as not worth solving: {entry.why}"
    if curated != entry.id:
        return f"its reviewed inputs were not used: {curated or 'harness run without them'}"
    return ""


def _reviewed(item: GateItem, ctx: GateContext) -> str | None:
    return item.review or None


TASK_GATES: list[Gate] = [
    Gate("traced", "both ranks traced at size full", "the other gates read the trace", _traced),
    Gate(
        "world_sizes",
        "the harness was accepted at world sizes 2 and 4",
        "a task is validated, timed and solved at several world sizes; one that runs at 2 only is a 2-rank trick",
        _world_sizes,
    ),
    Gate("communicates", ">= 1 collective per rank", "a level-4 task is a multi-GPU problem", _communicates),
    Gate(
        "min_work",
        f"comm >= {MIN_COMM_BYTES} B or matmul >= {MIN_MM_FLOPS} FLOPs or elementwise >= "
        f"{MIN_ELEMENTWISE} or moved >= {MIN_MOVED_BYTES} B (per rank, size full)",
        "below these a GPU measures launch latency, not the task (see the module docstring)",
        _min_work,
    ),
    Gate(
        "has_compute_or_real_comm",
        "matmul FLOPs > 0, or elementwise work > the communicated elements, or the collective kinds other "
        "than barrier are not exactly one (several, or barriers only), or the one kind has no level-1 family",
        "a single-collective wrapper re-runs a level-1 primitive at a smaller size",
        _has_compute_or_real_comm,
    ),
    Gate(
        "not_a_statistic",
        f"comm >= {MIN_COMM_BYTES} B, or matmul >= {MIN_MM_FLOPS} FLOPs, or an output of more than "
        f"{MAX_STATISTIC_ELEMS} elements",
        "a local reduction ending in a scalar all-reduce (loss metric, norm, min/max) is one pass over memory",
        _not_a_statistic,
    ),
    Gate(
        "gpu_time",
        f"eager median >= {MIN_GPU_MS} ms where a GPU record exists",
        "a task faster than one eager call's launch and host overhead measures overhead",
        _gpu_time,
    ),
    Gate(
        "settled_call",
        "the harness spec has a settled output (no comparison, equality check or host sync in the call)",
        "a timed call that clones and compares every input measures the harness, not the task",
        _settled_call,
    ),
    Gate(
        "harness_share",
        f"<= {100 * MAX_HARNESS_SHARE:.0f}% of the CPU-timed call in harness code, where share.json "
        "(benchmarks/level4_harness_share.py --json) measured it",
        "timing must measure the task: a task dominated by the copies the harness makes is not timed fairly",
        _harness_share,
    ),
    Gate(
        "reviewed",
        "a curated entry (scrapers/harness/curated) with verdict ship, whose inputs the harness accepted unchanged",
        "the audit found synthesized inputs implausible and some passing tasks not worth solving: a reviewer "
        "decides both, from production configurations (docs/level4-curated.md)",
        _reviewed,
    ),
]

# set gates (scrapers/level4/select.py applies them to the tasks passing TASK_GATES)
SET_GATES: dict[str, tuple[str, str]] = {
    "library_code": (
        "paths under test/tests/examples/benchmarks/docs ship only as the only copy of their "
        "pattern (tagged non_library)",
        "test and example helpers re-run what the library does, at toy sizes",
    ),
    "not_duplicate": (
        "one task per traced collective-and-op signature with shapes (prefer library code, then the shortest path)",
        "copies (NVIDIA/AMD/Ascend variants, re-exports) are one problem, not several",
    ),
}
GATE_NAMES = [g.name for g in TASK_GATES] + list(SET_GATES)


def check_task(item: GateItem, ctx: GateContext) -> dict[str, str | None]:
    """Every per-task gate's outcome (None: passed), in table order; gates after a failed `traced` are
    not evaluated (they would read a missing trace)."""
    out: dict[str, str | None] = {}
    for g in TASK_GATES:
        out[g.name] = g.check(item, ctx)
        if g.name == "traced" and out[g.name]:
            break
    return out


def level1_realizations() -> dict[str, str]:
    """realization -> level-1 family id, for the families made of that one realization (the taxonomy)."""
    from mgbench.taxonomy.loader import load_taxonomy

    out: dict[str, str] = {}
    for fam in load_taxonomy().families.values():
        if fam.level == 1 and len(fam.realization) == 1:
            out.setdefault(fam.realization[0], fam.id)
    return out
