"""The explicit `datasets.Features` schema of an mgbench row, with a description per column.

FIELDS is the single source: FEATURES is built from it, and so are the schema tables of
docs/dataset.md and of the dataset card. Lists of structs are `List({...})` (never the legacy
`Sequence({...})`, which turns them into a struct of lists).
"""

from __future__ import annotations

from typing import Any

from datasets import Features, List, Value

BACKENDS = ("cuda", "triton")

TOLERANCE = {"rtol": Value("float64"), "atol_rel": Value("float64")}
PROVENANCE = {
    "kind": Value("string"),
    "template": Value("string"),
    "repository": Value("string"),
    "path": Value("string"),
    "commit": Value("string"),
    "license": Value("string"),
    "url": Value("string"),
}
VALIDATION = {
    "backend": Value("string"),
    "hardware": Value("string"),
    "world_size": Value("int32"),
    "size": Value("string"),
    "status": Value("string"),
    "reason": Value("string"),
    "max_error": Value("float64"),
    "rtol": Value("float64"),
    "atol_rel": Value("float64"),
    "seconds": Value("float64"),
    "seed": Value("int64"),
    "checks": List({"name": Value("string"), "passed": Value("bool")}),
}
ROOFLINE = {
    k: Value("float64") for k in ("flops", "hbm_bytes", "comm_bytes", "compute_ms", "memory_ms", "comm_ms", "bound_ms")
}
BASELINE = {
    "hardware": Value("string"),
    "gpu": Value("string"),
    "gpu_count": Value("int32"),
    "world_size": Value("int32"),
    "baseline": Value("string"),
    "status": Value("string"),
    "reason": Value("string"),
    "median_ms": Value("float64"),
    "p10_ms": Value("float64"),
    "p90_ms": Value("float64"),
    "cv": Value("float64"),
    "iters": Value("int64"),
    "noise_speedup_p50": Value("float64"),
    "noise_speedup_p95": Value("float64"),
    "roofline": ROOFLINE,
    "fraction_of_roofline": Value("float64"),
    "peak_mem_bytes": Value("int64"),
}

# (column, feature, description) -- the order of the parquet columns.
FIELDS: list[tuple[str, Any, str]] = [
    ("task_id", Value("string"), "Unique task id, e.g. `l2-gemm_rs-bf16` (level, family, variant, scale, dtype)."),
    ("name", Value("string"), "Short human title (family / variant / scale)."),
    (
        "level",
        Value("int32"),
        "1 collective primitive, 2 one op fused with communication, 3 composed layers / multi-dim plans, 4 "
        "mined from real repositories.",
    ),
    ("family", Value("string"), "Task family (one taxonomy entry + one template)."),
    ("variant", Value("string"), "Family variant (`base` when the family has one)."),
    (
        "suite",
        Value("string"),
        "Task set: `core` (the benchmark as published) or a peer id, e.g. `pkb`: a family that reproduces that "
        "peer's problem in the peer's own form (`generate --suite pkb`).",
    ),
    ("scale", Value("string"), "Scale tag of the variant (`lat` latency-bound, `bw` bandwidth-bound, or empty)."),
    ("dims", List(Value("string")), "Parallelism dimensions of the plan (taxonomy ids)."),
    (
        "tradeoffs",
        List(Value("string")),
        "Trade-offs a fast solution must get right (taxonomy/tradeoffs.yaml ids: `transfer.*`, `schedule.*`, "
        "`ordering`, `partitioning`, `overlap`); the same for every task of a family.",
    ),
    (
        "collectives",
        List(Value("string")),
        "Communication realization: the collectives / p2p exchanges the reference uses.",
    ),
    ("workload", Value("string"), "The unsharded math (taxonomy workload id)."),
    (
        "plan",
        List({"dim": Value("string"), "size": Value("string")}),
        "Mesh axes: dim and size (an integer or `world`).",
    ),
    ("world_sizes", List(Value("int32")), "World sizes (number of ranks / GPUs) the task supports."),
    ("dtype", Value("string"), "Main floating dtype of the task (torch name)."),
    (
        "sizes",
        Value("string"),
        "JSON object `{size_class: {param: value}}`, the module's SIZES (`smoke`, `full`, ...).",
    ),
    (
        "shapes",
        Value("string"),
        "JSON object: the family's held-out shape rule `{fixed: [param], step: {param: k}}` (`{}`: every "
        "integer size varies); `mgbench eval` checks shapes drawn from it, never printed.",
    ),
    ("params", Value("string"), "JSON object of the family/variant parameters the template used."),
    ("forbid_collectives", Value("bool"), "True when a solution must not call torch.distributed collectives."),
    ("description", Value("string"), "What the task computes and how the inputs are sharded."),
    (
        "source",
        Value("string"),
        "The full task module: `solution`, `make_inputs`, `SIZES`, `oracle` (torch + stdlib only).",
    ),
    ("content_hash", Value("string"), "sha256 of `source`; baselines and validation results are matched on it."),
    ("prompt", {b: Value("string") for b in BACKENDS}, "The rendered solver prompt per backend (`cuda`, `triton`)."),
    (
        "tolerance",
        TOLERANCE,
        "Comparison tolerance: rtol, and atol = atol_rel x max(rms(expected), rms of the element's row), "
        "calibrated by validation.",
    ),
    (
        "provenance",
        PROVENANCE,
        "`kind` (`template` or `mined`); the template path, or repository/path/commit/license/url of a mined task.",
    ),
    (
        "validation",
        List(VALIDATION),
        "Validation results (one per backend x hardware x world size x size class), all passed.",
    ),
    (
        "baselines",
        List(BASELINE),
        "Per-hardware timings of the baselines (eager reference, torch.compile, symmetric-memory, null) "
        "with roofline figures.",
    ),
]

FEATURES = Features({name: feat for name, feat, _ in FIELDS})


def type_name(feat: Any, depth: int = 0) -> str:
    """A short readable type: string, list<string>, struct{a, b} (nested struct fields by name)."""
    if isinstance(feat, Value):
        return feat.dtype
    if isinstance(feat, List):
        return f"list<{type_name(feat.feature, depth)}>"
    if isinstance(feat, dict):
        if depth:
            return "struct"
        return "struct{" + ", ".join(f"{k}: {type_name(v, depth + 1)}" for k, v in feat.items()) + "}"
    return type(feat).__name__


# Meaning of the baseline fields that are not obvious from their names.
BASELINE_NOTES = {
    "hardware": "hardware tag (the results/<tag>/ folder the measurement came from)",
    "status": "`ok`, `failed` (with `reason`) or `n/a` (the baseline does not apply)",
    "cv": "coefficient of variation of the timed iterations",
    "baseline": "`eager` (the reference as written), `compile` (torch.compile of it), `symm_mem_<name>` "
    "(a hand-written symmetric-memory version), `null` (the reference scored against itself)",
    "median_ms": "median time of one call at the `full` size (device events, aggregated across ranks); "
    "p10/p90 likewise",
    "noise_speedup_p50": "noise floor from the null candidate (the reference timed against itself): "
    "median of |speedup - 1| over bootstrap resamples",
    "noise_speedup_p95": "95th percentile of the same; a speedup within 1 +/- this is noise",
    "roofline": "bound_ms = max(compute_ms, memory_ms, comm_ms): FLOPs, HBM bytes and per-rank "
    "communication bytes over the measured ceilings of the hardware",
    "fraction_of_roofline": "bound_ms / median_ms (1.0 = at the roofline)",
}


def schema_table() -> str:
    """The schema as a markdown table (column, type, description)."""
    lines = ["| column | type | description |", "|---|---|---|"]
    for name, feat, desc in FIELDS:
        lines.append(f"| `{name}` | `{type_name(feat)}` | {desc} |")
    return "\n".join(lines)


def baseline_table() -> str:
    """The fields of one `baselines` entry as a markdown table."""
    lines = ["| field | type | meaning |", "|---|---|---|"]
    for name, feat in BASELINE.items():
        lines.append(f"| `{name}` | `{type_name(feat)}` | {BASELINE_NOTES.get(name, '')} |")
    return "\n".join(lines)
