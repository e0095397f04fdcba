"""Harness share of level-4 tasks: how much of the timed `solution(*inputs)` call is harness code.

For the level-4 tasks of a harness.jsonl (default: those passing the gate.jsonl next to it; --all: every
accepted harness), render each task, run it on 2 gloo ranks (sandboxed child processes) at size full,
call it once to warm up, time a few plain calls, then attribute a few more calls between harness frames
(the runtime's `_mg_*` functions and the other synthesized parts: clones, draws, comparisons, hosting)
and the mined code (scrapers/level4/share.py). Prints a table (the rank with the larger share counts),
the median and max share and how many exceed 10% (the gate's `harness_share` limit for a shipped task).

These are CPU shares on gloo, under a profile hook (which slows Python frames, harness and mined alike):
they show where a call's time goes, they are not GPU timings.

  PYTHONPATH=. python3 benchmarks/level4_harness_share.py --harness H --out SCRAPE [--all] [--limit N]
      [--json ROWS [--retry-failed]]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mgbench.generator.mined import rendered_tasks  # noqa: E402
from mgbench.scrapers.harness.run.settle import _why, run_job  # noqa: E402
from mgbench.store import read_jsonl  # noqa: E402

THRESHOLD = 0.10


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--harness", required=True, help="harness.jsonl")
    ap.add_argument("--out", required=True, help="scrape folder (candidates.jsonl, modules/)")
    ap.add_argument("--all", action="store_true", help="every accepted harness, not only the gate's passes")
    ap.add_argument("--limit", type=int, help="at most this many tasks")
    ap.add_argument("--size", default="full")
    ap.add_argument("--calls", type=int, default=3, help="timed and attributed calls each (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per task (default: %(default)s)")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--jobs", type=int, default=1, help="tasks measured at once (default: %(default)s)")
    ap.add_argument(
        "--retry-failed",
        action="store_true",
        help="with --json: keep its measured rows, measure only the tasks it lacks or failed to run",
    )
    args = ap.parse_args(argv)
    harness = Path(args.harness)
    tasks = rendered_tasks(args.out, harness)
    if not args.all:
        gate = harness.with_name("gate.jsonl")
        if not gate.is_file():
            print(f"{gate}: no gate decisions (run `mgbench scrape gate`, or pass --all)", file=sys.stderr)
            return 2
        decided = list(read_jsonl(gate))  # read twice below (read_jsonl is a generator)
        passed = {r["content_hash"] for r in decided if r.get("passed")}
        if args.retry_failed:  # a task the gate failed only for its share, not measured or over: measure again
            passed |= {r["content_hash"] for r in decided if r.get("failed_gate") == "harness_share"}
        tasks = [t for t in tasks if t.content_hash in passed]
    tasks = tasks[: args.limit] if args.limit is not None else tasks
    # one row per task: a kept row (measured or failed) stays until its task is measured again, so an
    # interrupted run never turns a failure into an absent row (the gate reads that as "not measured here")
    rows = {r["task"]: r for r in _kept_rows(args)}
    # a kept row stands for the module it measured: a task whose module changed since is measured again
    tasks = [
        t for t in tasks if "share" not in (r := rows.get(t.task_id, {})) or r.get("content_hash") != t.content_hash
    ]
    if rows:
        print(f"{len(rows)} rows kept from {args.json}; measuring {len(tasks)}")
    print(f"{'task':60} {'call ms':>9} {'harness ms':>10} {'share':>7}  top harness functions (ms per call)")
    job = {"what": "share", "n": 0, "args": {"size": args.size, "calls": args.calls}}

    def measure(t):  # each task in its own pair of rank processes; threads only wait on them
        return t, *run_job(t.source, job, args.timeout, mem_mb=6144)

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for row in _rows(f.result() for f in as_completed([pool.submit(measure, t) for t in tasks])):
            rows[row["task"]] = row
            _write(list(rows.values()), args)  # each row as it comes (atomic rewrite): a stopped run resumes
    _summary(list(rows.values()), args)
    return 0


def _kept_rows(args) -> list[dict]:
    """With --retry-failed, every row of --json, measured or failed (rows of tasks this run does not select
    are carried over unchanged: the gate reads an absent row as "not measured here")."""
    if not (args.retry_failed and args.json and Path(args.json).is_file()):
        return []
    return json.loads(Path(args.json).read_text())


def _rows(done):
    """One row per measured task (printed as it is formed): its worst rank's call, harness time and share."""
    for t, status, replies in done:
        if status != "ok":
            print(f"{t.task_id[:60]:60} failed: {_why(status, replies)[:100]}", flush=True)
            yield {"task": t.task_id, "content_hash": t.content_hash, "error": _why(status, replies)}
            continue
        worst = max(replies, key=lambda r: r["share"])
        row = {
            "task": t.task_id,
            "content_hash": t.content_hash,
            **{k: worst[k] for k in ("call_ms", "harness_ms", "share", "top")},
        }
        top = ", ".join(f"{k} {v}" for k, v in worst["top"][:3])
        # harness ms is of the profiled calls (the hook slows them): the share is the figure, not the ms
        print(
            f"{t.task_id[:60]:60} {worst['call_ms']:9.3f} {worst['harness_ms']:10.3f} "
            f"{100 * worst['share']:6.1f}%  {top}",
            flush=True,
        )
        yield row


def _summary(rows, args):
    shares = [r["share"] for r in rows if "share" in r]
    if shares:
        over = sum(s > THRESHOLD for s in shares)
        print(
            f"\nCPU shares (gloo, 2 ranks, size {args.size}; not GPU results): {len(shares)} tasks, median "
            f"{100 * statistics.median(shares):.1f}%, max {100 * max(shares):.1f}%, "
            f"{over} above {100 * THRESHOLD:.0f}%; {len(rows) - len(shares)} failed to run"
        )
    _write(rows, args)


def _write(rows, args):
    if args.json:
        tmp = Path(args.json).with_suffix(".tmp")
        tmp.write_text(json.dumps(rows, indent=1))
        tmp.replace(args.json)


if __name__ == "__main__":
    sys.exit(main())
