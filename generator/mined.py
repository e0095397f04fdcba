"""Level-4 tasks from mined candidates with an accepted harness (scrapers/harness -> manifest).

Only tasks that passed the level-4 gate ship (gate.jsonl next to harness.jsonl, written by
`mgbench scrape gate`: scrapers/level4/); without that file `--mined` stops with an error naming it,
and `--mined-ungated` ships every accepted harness as before the gate. Rendering is unchanged by the
gate: a shipped task's module, and so its content hash, is the same either way."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mgbench.generator.manifest import TaskRecord, content_hash
from mgbench.scrapers.harness.make.render import sizes_of
from mgbench.scrapers.harness.run.settle import renderer
from mgbench.store import latest_by, read_jsonl
from mgbench.taxonomy import Taxonomy, load_taxonomy


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text.lower()).strip("_")[:40]


def task_id_of(cand: dict[str, Any]) -> str:
    repo = cand["provenance"]["repo"].split("/")[-1]
    return f"l4_{_slug(repo)}_{_slug(cand['qualname'])}_{cand['id'][1:9]}"


def spec_of(cand: dict[str, Any], res: dict[str, Any], task_id: str, tax: Taxonomy | None = None) -> dict[str, Any]:
    """The manifest fields of a mined task (same keys as templated specs, plus provenance). Its trade-offs
    are those of the first family the scraper matched that the taxonomy has, else the defaults of its
    realizations (taxonomy/tradeoffs.yaml `by_realization`; Taxonomy.mined_tradeoffs)."""
    pv, cl = cand["provenance"], cand.get("classification") or {}
    real = [r["id"] for r in cl.get("realizations", [])]
    tax = tax or load_taxonomy()
    return {
        "task_id": task_id,
        "level": 4,
        "family": (cl.get("families") or ["mined"])[0],
        "title": f"{cand['qualname']} ({pv['repo']})",
        "variant": cand["id"],
        "scale": "",
        "description": (cand.get("docstring") or "").strip().split("\n\n")[0][:500]
        or f"Mined from {pv['repo']} {pv['path']}: {cand['qualname']}.",
        "dims": [d["id"] for d in cl.get("dims", [])],
        "realization": real,
        "tradeoffs": tax.mined_tradeoffs(list(cl.get("families") or []), real),
        "workload": (cl.get("workload") or {}).get("id", "collective"),
        "plan": [],
        "world_sizes": res["world_sizes"],
        "dtype": _dtype(res["spec"]),
        "sizes": sizes_of(res["spec"]),
        "params": {"harness": res["spec"]},
        "template": None,
        "oracle": False,
        "provenance": {
            "repository": pv["repo"],
            "path": pv["path"],
            "commit": pv["commit"],
            "license": pv["license"],
            "url": pv["url"],
            "line_start": pv["line_start"],
            "line_end": pv["line_end"],
            "candidate": cand["id"],
            "inlined": [{**s, "url": _url(pv, s)} for s in (res.get("inline") or {}).get("spans", [])],
        },
        "harness_fingerprints": res.get("fingerprints", {}),
    }


def _url(pv: dict[str, Any], span: dict[str, Any]) -> str:
    """Permalink of an inlined span (same repository and commit as the candidate)."""
    return (
        f"https://github.com/{pv['repo']}/blob/{pv['commit']}/{span['path']}#L{span['line_start']}-L{span['line_end']}"
    )


def _dtype(spec: dict[str, Any]) -> str:
    return next((a.get("dtype", "float32") for a in spec["args"] if a["kind"] in ("tensor", "tensors")), "float32")


@dataclass
class RenderedTask:
    """The task module of an accepted harness, rendered in memory (not yet written)."""

    cand: dict[str, Any]
    res: dict[str, Any]
    task_id: str
    source: str

    @property
    def content_hash(self) -> str:
        return content_hash(self.source)


def harness_path(scrape_dir: Path | str, harness_file: Path | str | None = None) -> Path:
    return Path(harness_file) if harness_file else Path(scrape_dir) / "harness.jsonl"


def rendered_tasks(scrape_dir: Path | str, harness_file: Path | str | None = None) -> list[RenderedTask]:
    """Every accepted harness of the scrape folder as a task module source, by candidate id."""
    scrape_dir = Path(scrape_dir)
    results = latest_by(harness_path(scrape_dir, harness_file), lambda r: r["id"])
    accepted = {k: r for k, r in results.items() if r["accepted"] and r.get("spec")}
    with (scrape_dir / "candidates.jsonl").open() as f:
        cands = [c for c in map(json.loads, f) if c["id"] in accepted]
    out = []
    for cand in sorted(cands, key=lambda c: c["id"]):
        res = accepted[cand["id"]]
        tid = task_id_of(cand)
        out.append(RenderedTask(cand, res, tid, renderer(cand, res, scrape_dir, tid)(res["spec"])))
    return out


def write_task(out: Path, task: RenderedTask, tax: Taxonomy | None = None) -> tuple[TaskRecord, Path]:
    """Write out/tasks/<task_id>.py (only when it changed); its manifest record and path."""
    rel = f"tasks/{task.task_id}.py"
    path = out / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != task.source:
        path.write_text(task.source)
    return TaskRecord(spec_of(task.cand, task.res, task.task_id, tax), rel, task.content_hash), path


def gate_passes(scrape_dir: Path | str, harness_file: Path | str | None = None) -> dict[str, dict[str, Any]]:
    """content hash -> gate.jsonl record of the tasks that passed (gate.jsonl next to harness.jsonl)."""
    path = harness_path(scrape_dir, harness_file).with_name("gate.jsonl")
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no level-4 gate decisions next to the harness results, so no "
            "mined task ships; run `mgbench scrape gate` first (or --mined-ungated to "
            "ship every accepted harness, the behaviour before the gate)"
        )
    return {r["content_hash"]: r for r in read_jsonl(path) if r.get("passed")}


def mined_tasks(
    out: Path,
    scrape_dir: Path | str,
    harness_file: Path | str | None = None,
    ungated: bool = False,
    tax: Taxonomy | None = None,
) -> tuple[list[TaskRecord], list[Path]]:
    """Write the accepted harnesses that passed the level-4 gate (every one with `ungated`) into
    out/tasks/<task_id>.py; the manifest records. A task whose module changed since it was gated (its
    content hash has no gate record) does not ship."""
    passes = None if ungated else gate_passes(scrape_dir, harness_file)
    tax = tax or load_taxonomy()
    records, paths = [], []
    for task in rendered_tasks(scrape_dir, harness_file):
        if passes is not None and task.content_hash not in passes:
            continue
        rec, path = write_task(out, task, tax)
        records.append(rec)
        paths.append(path)
    return records, paths
