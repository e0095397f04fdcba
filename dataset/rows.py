"""Turn manifest records + validation results + GPU baselines into dataset rows.

A task goes in when every latest validation result for its current content hash passed. Tasks
with a failed result are reported as `failed` (publishing refuses them); tasks without any
result are reported as `not_validated` and left out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mgbench.dataset.baselines import Hardware, load_gpu_results
from mgbench.dataset.prompts import render_prompts
from mgbench.store import load_manifest, read_jsonl, validation_key


@dataclass
class RowSet:
    """The rows to publish and what was left out, with the reasons."""

    rows: list[dict[str, Any]]
    failed: list[tuple[str, str]] = field(default_factory=list)  # (task_id, why)
    not_validated: list[str] = field(default_factory=list)
    hardware: dict[str, Hardware] = field(default_factory=dict)
    stale_baselines: int = 0


def validation_entry(r: dict[str, Any]) -> dict[str, Any]:
    """One `validation` struct of the schema from a ValidationResult record."""
    tol = r.get("tolerance") or {}
    checks = r.get("checks") or {}
    return {
        "backend": r["backend"],
        "hardware": r.get("hardware", ""),
        "world_size": r["world_size"],
        "size": r["size"],
        "status": r["status"],
        "reason": r.get("reason", ""),
        "max_error": r.get("max_error"),
        "rtol": tol.get("rtol"),
        "atol_rel": tol.get("atol_rel"),
        "seconds": r.get("seconds"),
        "seed": r.get("seed"),
        "checks": [{"name": k, "passed": checks[k]} for k in sorted(checks)],
    }


def latest_results(paths: Iterable[Path | str]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The latest ValidationResult per (task, hash, world size, size, backend), grouped by (task, hash)."""
    latest: dict[tuple, dict[str, Any]] = {}
    for path in paths:
        for rec in read_jsonl(path):
            latest[validation_key(rec)] = rec
    by_task: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for key in sorted(latest, key=lambda k: (k[0], k[1], k[4], k[3], k[2])):
        by_task.setdefault(key[:2], []).append(latest[key])
    return by_task


def task_row(
    t: dict[str, Any], source: str, results: list[dict[str, Any]], baselines: list[dict[str, Any]]
) -> dict[str, Any]:
    """The row of one task (without `prompt`); the tolerance is the widest any result calibrated."""
    tols = [r["tolerance"] for r in results if r.get("tolerance")]
    tol = max(tols, key=lambda x: (x["atol_rel"], x["rtol"]), default={"rtol": None, "atol_rel": None})
    prov = t.get("provenance") or {}
    return {
        "task_id": t["task_id"],
        "name": t.get("title", t["task_id"]),
        "level": t["level"],
        "family": t["family"],
        "variant": t.get("variant", ""),
        "suite": t.get("suite", "core"),  # manifests from before suites hold core tasks only
        "scale": t.get("scale", ""),
        "dims": t.get("dims", []),
        "tradeoffs": t.get("tradeoffs", []),
        "collectives": t.get("realization", []),
        "workload": t.get("workload", ""),
        "plan": [{"dim": a["dim"], "size": str(a["size"])} for a in t.get("plan", [])],
        "world_sizes": t.get("world_sizes", []),
        "dtype": t["dtype"],
        "sizes": json.dumps(t.get("sizes", {}), sort_keys=True),
        "shapes": json.dumps(t.get("shapes", {}), sort_keys=True),
        "params": json.dumps(t.get("params", {}), sort_keys=True),
        "forbid_collectives": bool(t.get("forbid_collectives", False)),
        "description": t.get("description", ""),
        "source": source,
        "content_hash": t["content_hash"],
        "tolerance": {"rtol": tol["rtol"], "atol_rel": tol["atol_rel"]},
        "provenance": {
            "kind": "mined" if t["level"] == 4 or prov.get("repository") else "template",
            "template": t.get("template"),
            **{k: prov.get(k) for k in ("repository", "path", "commit", "license", "url")},
        },
        "validation": [validation_entry(r) for r in results],
        "baselines": baselines,
    }


def build_rows(
    out_dir: Path | str, results_paths: Iterable[Path | str], results_roots: Iterable[Path | str] = ()
) -> RowSet:
    """Rows of every task that passed validation, with prompts and per-hardware baselines."""
    tasks = load_manifest(out_dir)
    gpu = load_gpu_results(results_roots, {(t["task_id"], t["content_hash"]) for t in tasks})
    results = latest_results([*results_paths, *gpu.validation_files])
    out = RowSet([], hardware=gpu.hardware, stale_baselines=gpu.stale)
    for t in sorted(tasks, key=lambda t: t["task_id"]):
        key = (t["task_id"], t["content_hash"])
        res = results.get(key, [])
        bad = [r for r in res if r["status"] != "passed"]
        source = Path(t["_path"]).read_text()
        if hashlib.sha256(source.encode()).hexdigest() != t["content_hash"]:
            out.failed.append(
                (
                    t["task_id"],
                    f"{t['_path']} changed since generation (content hash "
                    "differs from the manifest; re-run generate and validate)",
                )
            )
        elif bad:
            out.failed.append(
                (
                    t["task_id"],
                    "; ".join(
                        f"{r['backend']} world size {r['world_size']} ({r['size']}): {r.get('reason') or 'failed'}"
                        for r in bad
                    ),
                )
            )
        elif not res:
            out.not_validated.append(t["task_id"])
        else:
            row = task_row(t, source, res, gpu.for_task(*key))
            row["prompt"] = render_prompts(row, gpu.hardware)
            out.rows.append(row)
    return out
