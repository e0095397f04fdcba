"""Turn manifest records + validation results into dataset rows (only tasks that passed)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from validation.run import load_manifest
from validation.store import read_jsonl


def _validation_entries(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keep = ("world_size", "backend", "size", "hardware", "status", "max_error", "seconds")
    return [{k: r.get(k) for k in keep} for r in sorted(results, key=lambda r: (r["backend"], r["size"], r["world_size"]))]


def build_rows(out_dir: Path | str, results_paths: Iterable[Path | str]
               ) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """(rows of tasks whose latest result at every validated world size passed, [(excluded id, why)])."""
    tasks = load_manifest(out_dir)
    latest: dict[tuple, dict[str, Any]] = {}
    for path in results_paths:
        for rec in read_jsonl(path):
            latest[(rec["task_id"], rec["content_hash"], rec["world_size"], rec["size"], rec["backend"])] = rec
    by_task: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for (tid, h, *_), rec in latest.items():
        by_task.setdefault((tid, h), []).append(rec)
    rows, excluded = [], []
    for t in tasks:
        res = by_task.get((t["task_id"], t["content_hash"]), [])
        if not res:
            excluded.append((t["task_id"], "not validated"))
            continue
        bad = [r for r in res if r["status"] != "passed"]
        if bad:
            excluded.append((t["task_id"], f"failed at world size {bad[0]['world_size']}: {bad[0]['reason']}"))
            continue
        tol = max((r["tolerance"] for r in res if r.get("tolerance")), key=lambda x: x["atol_rel"], default=None)
        rows.append({
            "task_id": t["task_id"], "name": t.get("title", t["task_id"]), "level": t["level"],
            "family": t["family"], "variant": t.get("variant", ""), "scale": t.get("scale", ""),
            "dtype": t["dtype"], "dims": t.get("dims", []),
            "plan": [{"dim": a["dim"], "size": str(a["size"])} for a in t.get("plan", [])],
            "workload": t.get("workload", ""), "collectives": t.get("realization", []),
            "world_sizes": t.get("world_sizes", []), "sizes": json.dumps(t.get("sizes", {}), sort_keys=True),
            "description": t.get("description", ""), "source": Path(t["_path"]).read_text(),
            "content_hash": t["content_hash"], "tolerance": tol or {"rtol": None, "atol_rel": None},
            "provenance": {"kind": "template" if t["level"] != 4 else "mined", "template": t.get("template"),
                           **{k: t.get("provenance", {}).get(k) for k in ("repository", "path", "commit", "license", "url")}},
            "validation": _validation_entries(res),
        })
    return rows, excluded
