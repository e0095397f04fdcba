"""Level-4 tasks from mined candidates with an accepted harness (scrapers/harness -> manifest)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from generator.manifest import TaskRecord, content_hash
from mgbench.store import latest_by
from scrapers.harness.splice import apply
from scrapers.harness.render import SMOKE_N, full_n, prepare, task_source


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text.lower()).strip("_")[:40]


def task_id_of(cand: dict[str, Any]) -> str:
    repo = cand["provenance"]["repo"].split("/")[-1]
    return f"l4_{_slug(repo)}_{_slug(cand['qualname'])}_{cand['id'][1:9]}"


def spec_of(cand: dict[str, Any], res: dict[str, Any], task_id: str) -> dict[str, Any]:
    """The manifest fields of a mined task (same keys as templated specs, plus provenance)."""
    pv, cl = cand["provenance"], cand.get("classification") or {}
    real = [r["id"] for r in cl.get("realizations", [])]
    return {"task_id": task_id, "level": 4, "family": (cl.get("families") or ["mined"])[0],
            "title": f"{cand['qualname']} ({pv['repo']})", "variant": cand["id"], "scale": "",
            "description": (cand.get("docstring") or "").strip().split("\n\n")[0][:500] or
            f"Mined from {pv['repo']} {pv['path']}: {cand['qualname']}.",
            "dims": [d["id"] for d in cl.get("dims", [])], "realization": real,
            "workload": (cl.get("workload") or {}).get("id", "collective"), "plan": [],
            "world_sizes": res["world_sizes"], "dtype": _dtype(res["spec"]),
            "sizes": {"smoke": {"n": SMOKE_N}, "full": {"n": full_n(res["spec"])}}, "params": {"harness": res["spec"]},
            "template": None, "oracle": False,
            "provenance": {"repository": pv["repo"], "path": pv["path"], "commit": pv["commit"],
                           "license": pv["license"], "url": pv["url"], "line_start": pv["line_start"],
                           "line_end": pv["line_end"], "candidate": cand["id"],
                           "inlined": [{**s, "url": _url(pv, s)} for s in (res.get("inline") or {}).get("spans", [])]},
            "harness_fingerprints": res.get("fingerprints", {})}


def _url(pv: dict[str, Any], span: dict[str, Any]) -> str:
    """Permalink of an inlined span (same repository and commit as the candidate)."""
    return f"https://github.com/{pv['repo']}/blob/{pv['commit']}/{span['path']}#L{span['line_start']}-L{span['line_end']}"


def _dtype(spec: dict[str, Any]) -> str:
    return next((a.get("dtype", "float32") for a in spec["args"] if a["kind"] in ("tensor", "tensors")), "float32")


def mined_tasks(out: Path, scrape_dir: Path | str, harness_file: Path | str | None = None
                ) -> tuple[list[TaskRecord], list[Path]]:
    """Render every accepted harness into out/tasks/<task_id>.py; the manifest records."""
    scrape_dir = Path(scrape_dir)
    results = latest_by(Path(harness_file) if harness_file else scrape_dir / "harness.jsonl", lambda r: r["id"])
    accepted = {k: r for k, r in results.items() if r["accepted"] and r.get("spec")}
    records, paths = [], []
    with (scrape_dir / "candidates.jsonl").open() as f:
        cands = [c for c in map(json.loads, f) if c["id"] in accepted]
    for cand in sorted(cands, key=lambda c: c["id"]):
        res = accepted[cand["id"]]
        tid = task_id_of(cand)
        inl = res.get("inline") or {}
        text = apply((scrape_dir / cand["module_path"]).read_text(), inl)
        source = task_source(cand, prepare(text, bool(res["spec"].get("numpy"))), res["spec"], tid, inl.get("spans"))
        rel = f"tasks/{tid}.py"
        path = out / rel
        if not path.exists() or path.read_text() != source:
            path.write_text(source)
        records.append(TaskRecord(spec_of(cand, res, tid), rel, content_hash(source)))
        paths.append(path)
    return records, paths
