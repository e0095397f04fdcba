"""Summaries of a GPU results folder (results/<tag>/): per-task cost table and acceptance figures.

Reads hardware.json, validation-nccl.jsonl and baselines.jsonl (latest line per key) and reports:
coverage, failures with reasons, whether the roofline bound stays under every measured baseline,
the eager all-reduce fraction of roofline at >= 64 MB per rank, the null-candidate noise floor,
GPU-seconds per task, peak memory per rank and the vendor-fused speedups over eager.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from mgbench.report import table
from mgbench.store import latest_by, read_jsonl, validation_key
from mgbench.validation.gpu.run import baseline_key
from mgbench.validation.timing import quantile

BIG_BYTES = 64 * 2**20


def _current(path: Path, key: Any, hashes: dict[str, str] | None) -> list[dict]:
    """Latest line per key, for each task's current content hash only: the manifest's when given,
    else the newest hash the file holds for that task (lines of edited tasks' old versions drop out)."""
    if not path.exists():
        return []
    if hashes is None:
        hashes = {r["task_id"]: r["content_hash"] for r in read_jsonl(path)}
    return [r for r in latest_by(path, key).values() if hashes.get(r["task_id"]) == r["content_hash"]]


def load(
    results_dir: Path | str, backend: str = "nccl", hashes: dict[str, str] | None = None
) -> tuple[dict, list[dict], list[dict]]:
    d = Path(results_dir)
    hw = json.loads((d / "hardware.json").read_text()) if (d / "hardware.json").exists() else {}
    val = _current(d / f"validation-{backend}.jsonl", validation_key, hashes)
    bl = _current(d / "baselines.jsonl", baseline_key, hashes)
    return hw, val, bl


def _by(bl: list[dict], name: str) -> dict[tuple, dict]:
    return {(r["task_id"], r["world_size"]): r for r in bl if r["baseline"] == name}


def acceptance(
    results_dir: Path | str, manifest: list[dict[str, Any]] | None = None, backend: str = "nccl", world_size: int = 2
) -> dict[str, Any]:
    """The GPU pass's acceptance figures from the stored results (coverage, failures, roofline-bound
    violations, large all-reduces' fraction of the bound, null noise floor, GPU-seconds per task, peak
    memory, speedups of the other baselines over eager); with a manifest, over its tasks that run at
    `world_size` and their current content hashes."""
    hashes = {t["task_id"]: t["content_hash"] for t in manifest} if manifest is not None else None
    manifest_ids = (
        [t["task_id"] for t in manifest if world_size in t.get("world_sizes", [world_size])]
        if manifest is not None
        else None
    )
    hw, val, bl = load(results_dir, backend, hashes)
    eager, null = _by(bl, "eager"), _by(bl, "null")
    ok_eager = {k for k, r in eager.items() if r["status"] == "ok"}
    ids = manifest_ids or sorted({r["task_id"] for r in val})
    covered = {k[0] for k in ok_eager if k[0] in ids}
    failures = sorted(
        {(r["task_id"], r["reason"]) for r in val if r["status"] != "passed"}
        | {
            (r["task_id"], f"{r['baseline']}: {r['reason']}")
            for r in bl
            if r["status"] == "failed" and r["baseline"] in ("eager", "null")
        }
    )
    violations = [
        (r["task_id"], r["baseline"], r["median_ms"], r["roofline"]["bound_ms"])
        for r in bl
        if r["status"] == "ok"
        and r.get("roofline")
        and r["median_ms"] is not None
        and r["roofline"]["bound_ms"] > r["median_ms"]
    ]
    ar = [
        r
        for r in eager.values()
        if r["status"] == "ok" and r.get("family") == "all_reduce" and r["roofline"]["hbm_bytes"] / 2 >= BIG_BYTES
    ]
    noise = [abs(r["speedup"] - 1) for r in null.values() if r["status"] == "ok" and r.get("speedup")]
    check_s = {r["task_id"]: r["seconds"] for r in val}
    per_task = [check_s.get(k[0], 0.0) + (r.get("seconds") or 0.0) for k, r in eager.items()]
    extra = [r for r in bl if r["baseline"] not in ("eager", "null")]
    peaks = [r["peak_mem_bytes"] for r in eager.values() if r.get("peak_mem_bytes") is not None]
    vendor = {}
    for r in extra:
        e = eager.get((r["task_id"], r["world_size"]))
        if r["status"] == "ok" and e and e["status"] == "ok":
            vendor[(r["task_id"], r["baseline"])] = e["median_ms"] / r["median_ms"]
    return {
        "hardware": hw.get("tag"),
        "tasks": len(ids),
        "covered": len(covered),
        "coverage": len(covered) / len(ids) if ids else 0.0,
        "failures": failures,
        "bound_violations": violations,
        "allreduce_big_fraction": {r["task_id"]: r["fraction_of_roofline"] for r in ar},
        "null_abs_median": statistics.median(noise) if noise else None,
        "null_abs_p95": quantile(noise, 0.95) if noise else None,
        "gpu_s_per_task": statistics.fmean(per_task) if per_task else None,
        "gpu_s_total_main": sum(per_task),
        "gpu_s_extra_pass": sum(r.get("seconds") or 0.0 for r in extra),
        "extra_status": {s: sum(1 for r in extra if r["status"] == s) for s in ("ok", "failed", "n/a")},
        "peak_mem_max_bytes": max(peaks) if peaks else None,
        "speedup_over_eager": vendor,
    }


def task_table(results_dir: Path | str, backend: str = "nccl", hashes: dict[str, str] | None = None) -> str:
    """One row per (task, world size): cost, peak memory, eager time, bound, fraction, null speedup."""
    _, val, bl = load(results_dir, backend, hashes)
    check_s = {(r["task_id"], r["world_size"]): r["seconds"] for r in val}
    eager, null = _by(bl, "eager"), _by(bl, "null")
    rows = []
    for k in sorted(eager):
        e, n = eager[k], null.get(k, {})
        rf = e.get("roofline") or {}
        rows.append(
            (
                k[0],
                k[1],
                check_s.get(k, 0.0),
                e.get("seconds") or 0.0,
                (e.get("peak_mem_bytes") or 0) / 2**30,
                e.get("median_ms") or float("nan"),
                rf.get("bound_ms", float("nan")),
                e.get("fraction_of_roofline") or float("nan"),
                n.get("speedup") or float("nan"),
            )
        )
    return table(rows, ["task", "ws", "check_s", "time_s", "peak_GiB", "eager_ms", "bound_ms", "frac", "null"])


def format_acceptance(a: dict[str, Any]) -> str:
    lines = [
        f"coverage: {a['covered']}/{a['tasks']} = {a['coverage']:.1%} (eager timed)",
        f"bound violations (bound > measured): {len(a['bound_violations'])}",
    ]
    lines += [f"  {t} {b}: measured {m:.4f} ms < bound {bd:.4f} ms" for t, b, m, bd in a["bound_violations"][:10]]
    lines.append(
        "eager all-reduce >= 64 MB/rank fraction of roofline: "
        + ", ".join(f"{t} {f:.2f}" for t, f in sorted(a["allreduce_big_fraction"].items()))
    )
    if a["null_abs_median"] is not None:
        lines.append(f"null |speedup-1|: median {a['null_abs_median']:.2%}, p95 {a['null_abs_p95']:.2%}")
    if a["gpu_s_per_task"] is not None:
        lines.append(
            f"GPU-seconds per task (check + eager + null): {a['gpu_s_per_task']:.2f} "
            f"(total {a['gpu_s_total_main']:.0f} s); extra pass {a['gpu_s_extra_pass']:.0f} s "
            f"{a['extra_status']}"
        )
    if a["peak_mem_max_bytes"] is not None:
        lines.append(f"peak memory per rank, max over tasks: {a['peak_mem_max_bytes'] / 2**30:.2f} GiB")
    for (t, b), s in sorted(a["speedup_over_eager"].items()):
        lines.append(f"  {b} on {t}: {s:.2f}x eager")
    lines += [f"FAILED {t}: {why}" for t, why in a["failures"]]
    return "\n".join(lines)
