"""`mgbench scrape gate`: render every accepted harness, trace it at full size on 2 gloo ranks, apply
the gate table and write gate.jsonl (and trace.jsonl) next to harness.jsonl."""

from __future__ import annotations

import argparse
import glob
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

DEFAULT_GPU_RECORDS = "results/*/baselines.jsonl"


def add_parser(ss: argparse._SubParsersAction, default_out: str) -> None:
    g = ss.add_parser(
        "gate",
        help="level 4: trace accepted harnesses at full size and gate what ships",
        description="Render every accepted harness of OUT, trace it at size full on 2 gloo "
        "ranks (child processes, per-task timeout; resumable by content hash), "
        "apply the gates of scrapers/level4/gate.py and write gate.jsonl next "
        "to the harness file; `generate --mined` ships only the tasks that pass.",
    )
    g.add_argument("--out", default=default_out, help="scrape folder (default: %(default)s)")
    g.add_argument("--harness", help="harness.jsonl (default: OUT/harness.jsonl); trace and gate files go next to it")
    g.add_argument("--work", help="folder for the rendered modules (default: next to the harness file)")
    g.add_argument("--timeout", type=float, default=120.0, help="seconds per traced task (default: %(default)s)")
    g.add_argument("--limit", type=int, help="trace at most this many new tasks this run")
    g.add_argument(
        "--gpu-records",
        action="append",
        help=f"GPU baselines JSONL for the gpu_time gate (repeatable; default: {DEFAULT_GPU_RECORDS})",
    )
    g.add_argument(
        "--unreviewed",
        action="store_true",
        help="skip the `reviewed` gate (ship tasks without a curated entry: their inputs are guesses)",
    )
    g.add_argument("--quiet", action="store_true")
    g.set_defaults(func=cmd_gate)


def cmd_gate(args: argparse.Namespace) -> int:
    from mgbench.generator.mined import harness_path, rendered_tasks
    from mgbench.scrapers.harness.curated import default as curated_registry
    from mgbench.scrapers.level4.gate import GateContext, GateItem, level1_realizations, review_of
    from mgbench.scrapers.level4.select import GATE_FILE, TRACE_FILE, decide, gpu_eager_ms, write_decisions
    from mgbench.scrapers.level4.trace import TraceTarget, trace_tasks
    from mgbench.store import latest_by, read_jsonl

    hpath = harness_path(args.out, args.harness)
    if not hpath.is_file():
        raise FileNotFoundError(f"{hpath}: no harness results (run `mgbench scrape harness` first)")
    require_settled(hpath, args.out)
    work = Path(args.work) if args.work else hpath.parent / "level4-tasks"
    work.mkdir(parents=True, exist_ok=True)
    tasks = rendered_tasks(args.out, hpath)
    targets = []
    for t in tasks:
        path = work / f"{t.task_id}.py"
        if not path.exists() or path.read_text() != t.source:
            path.write_text(t.source)
        targets.append(
            TraceTarget(t.task_id, t.content_hash, str(path.resolve()), t.cand["id"], t.cand["provenance"]["repo"])
        )
    log = None if args.quiet else (lambda m: print(m, flush=True))
    traces = trace_tasks(targets, hpath.with_name(TRACE_FILE), args.timeout, args.limit, progress=log)
    harness = latest_by(hpath, lambda r: r["id"])
    files = args.gpu_records or sorted(glob.glob(DEFAULT_GPU_RECORDS))
    gpu = gpu_eager_ms(r for f in files for r in read_jsonl(f))
    shares = harness_shares(hpath.with_name(SHARE_FILE), {t.task_id: t.content_hash for t in targets})
    registry = curated_registry()
    items = [
        GateItem(
            t.task_id,
            t.cand["id"],
            t.content_hash,
            t.cand["provenance"]["repo"],
            t.cand["provenance"]["path"],
            harness[t.cand["id"]].get("role", ""),
            traces.get(t.content_hash),
            gpu.get(t.content_hash),
            "output" in harness[t.cand["id"]].get("spec", {}),
            shares.get(t.task_id),
            tuple(harness[t.cand["id"]].get("world_sizes") or (2,)),
            None if args.unreviewed else review_of(registry.match(t.cand), harness[t.cand["id"]].get("curated")),
        )
        for t in tasks
    ]
    decisions = decide(items, GateContext(level1_realizations()))
    write_decisions(hpath.with_name(GATE_FILE), decisions)
    print(summary(decisions, hpath.with_name(GATE_FILE)))
    untraced = sum(d.failed_gate == "traced" and "not traced" in d.reason for d in decisions)
    if untraced:
        print(f"note: {untraced} task(s) not traced yet (--limit); re-run to trace them", file=sys.stderr)
    return 0


SHARE_FILE = "share.json"  # benchmarks/level4_harness_share.py --json, next to the harness file
UNMEASURED = float("nan")  # a share.json row with an error instead of a share


def harness_shares(path: Path, current: dict[str, str] | None = None) -> dict[str, float]:
    """task id -> measured harness share of its CPU-timed call, from a share.json when there is one; a
    task the benchmark tried and could not run gets NaN (UNMEASURED: the gate cannot certify it), and so
    does a row measured for another module of the task (its `content_hash` is not the task's in `current`:
    the task changed since, the share no longer certifies it)."""
    if not path.is_file():
        return {}
    try:
        rows = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e.msg}, line {e.lineno})") from e

    def stale(r: dict) -> bool:  # rows written before rows carried their hash are taken as they are
        now = (current or {}).get(r["task"])
        return now is not None and "content_hash" in r and r["content_hash"] != now

    return {r["task"]: float(r["share"]) if "share" in r and not stale(r) else UNMEASURED for r in rows}


def require_settled(hpath: Path, scrape_dir: str) -> None:
    """The gate traces tasks at their settled full size (bytes per rank) and with the settled call: it refuses
    a harness file with unsettled accepted results rather than gate them at the old size (settling runs every
    task twice on 2 ranks, a pass of its own with --jobs)."""
    from mgbench.scrapers.harness.run.settle_run import unsettled

    left = unsettled(hpath)
    if left:
        raise ValueError(
            f"{hpath}: {len(left)} accepted result(s) are not settled (e.g. {left[0]}); run "
            f"`mgbench scrape settle --harness {hpath} --out {scrape_dir} --jobs J` first"
        )


def summary(decisions: list[Any], path: Path) -> str:
    """One line per gate with its rejections, then the shipped count."""
    first = Counter(d.failed_gate for d in decisions if not d.passed)
    shipped = [d for d in decisions if d.passed]
    lines = [f"{g}: {n} rejected" for g, n in first.items()]
    lines.append(
        f"shipped {len(shipped)} of {len(decisions)} accepted harnesses "
        f"({len({d.pattern for d in shipped})} distinct patterns, "
        f"{sum('non_library' in d.tags for d in shipped)} tagged non_library); decisions in {path}"
    )
    return "\n".join(lines)
