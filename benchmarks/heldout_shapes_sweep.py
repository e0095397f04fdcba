"""Correctness of every templated task at held-out shapes: shapes of its smoke shape space
(validation/eval/shapes.py) that no prompt prints, checked as `mgbench validate` checks the published ones.

For each task of OUT (level 4, the mined tasks, has no shape space and is left out) it draws --draws shapes
of the smoke class with random.Random seeded by --seed and the task id, under the family's `shapes` rule of
the manifest record, and runs the checks (oracle, determinism, input sensitivity, degenerate outputs) at
each on a gloo rank pool per world size. A task supporting none of the --world-size values runs at its
smallest world size. Records (the validation record plus `shape`, `draw` and `rule`) are appended to
RESULTS one by one; a re-run skips the (task, module hash, world size, shape) items already recorded
(--retry-failed: except the failed ones), so a rule change, which moves the shapes, reruns its tasks.
It ends with a table of the failures of the selected tasks' latest shapes.

  PYTHONPATH=. python benchmarks/heldout_shapes_sweep.py --out mgbench-out --results R.jsonl --jobs 2
  PYTHONPATH=. python benchmarks/heldout_shapes_sweep.py --out mgbench-out --results R.jsonl --family rope
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mgbench.report import Progress, table  # noqa: E402
from mgbench.store import append_jsonl, latest_by, load_manifest  # noqa: E402
from mgbench.validation.eval.shapes import HELDOUT_SIZE, describe, draw, space_of  # noqa: E402

SIZE = "smoke"  # the size class whose shape space is drawn from


def shapes_of(task: dict[str, Any], n: int, seed: int) -> list[dict[str, Any]]:
    """Up to `n` distinct held-out smoke shapes of a task (fewer when its space has fewer; none when it
    has nothing to vary), drawn deterministically from the seed and the task id."""
    space = space_of(task["sizes"], SIZE, task.get("shapes") or None)
    rng = random.Random(f"{seed}:{task['task_id']}")
    out: list[dict[str, Any]] = []
    for _ in range(8 * n):  # a small space may repeat a shape; don't loop forever on it
        if len(out) == n or (shape := draw(space, rng)) is None:
            break
        if shape not in out:
            out.append(shape)
    return out


def item_key(rec: dict[str, Any]) -> tuple:
    return (rec["task_id"], rec["content_hash"], rec["world_size"], json.dumps(rec["shape"], sort_keys=True))


def selected(args: argparse.Namespace) -> tuple[list[tuple[int, dict[str, Any], int, dict[str, Any]]], list[str]]:
    """(world size, task, draw index, shape) items of the selected tasks, and the ids of those with no
    held-out shape."""
    from mgbench.validation.run import _plan

    out = Path(args.out)
    tasks = [
        t
        for t in load_manifest(out)
        if t.get("level") != 4
        and (not args.family or t["family"] in args.family)
        and (not args.level or t["level"] in args.level)
        and (not args.task or t["task_id"] in args.task)
    ]
    items, unvaried = [], []
    for ws, todo in _plan(tasks, args.world_sizes or [2], lift=True):
        for t in todo:
            shapes = shapes_of(t, args.draws, args.seed)
            if not shapes:
                unvaried.append(t["task_id"])
            items += [(ws, t, i, shape) for i, shape in enumerate(shapes)]
    return items, sorted(set(unvaried))


def recorded(args: argparse.Namespace, ws: int, t: dict[str, Any], shape: dict[str, Any]) -> dict[str, Any] | None:
    return args.done.get((t["task_id"], t["content_hash"], ws, json.dumps(shape, sort_keys=True)))


def plan(args: argparse.Namespace) -> tuple[list[tuple[int, dict[str, Any], int, dict[str, Any]]], list[str]]:
    """The selected items not yet recorded (--retry-failed: or recorded as failed), and the ids of the
    tasks with no held-out shape."""
    items, unvaried = selected(args)
    todo = []
    for ws, t, i, shape in items:
        rec = recorded(args, ws, t, shape)
        if not rec or (rec["status"] != "passed" and args.retry_failed):
            todo.append((ws, t, i, shape))
    return todo, unvaried


def run(args: argparse.Namespace) -> None:
    from mgbench.validation.pool import RankPool
    from mgbench.validation.run import _hardware, check_task

    items, unvaried = plan(args)
    hardware = _hardware("gloo")
    print(
        f"{len(items)} (task, world size, shape) items to check at held-out {SIZE} shapes on gloo"
        + (f"; {len(unvaried)} tasks have no held-out shape" if unvaried else ""),
        flush=True,
    )
    by_ws: dict[int, list] = {}
    for it in items:
        by_ws.setdefault(it[0], []).append(it)
    lock = threading.Lock()
    prog = Progress(len(items), "heldout")
    t0 = time.monotonic()

    def worker() -> None:
        for ws in sorted(by_ws):
            pool = None
            try:
                while True:
                    with lock:
                        if not by_ws[ws]:
                            break
                        _, t, i, shape = by_ws[ws].pop(0)
                    task = {**t, "_path": str(Path(args.out) / t["module"])}
                    if pool is None:
                        pool = RankPool(ws, "gloo", pg_timeout_s=max(2 * args.timeout, 60)).__enter__()
                    res = check_task(pool, task, HELDOUT_SIZE, hardware, args.seed, args.timeout, shape=shape)
                    if res.status != "passed":  # a rank that failed mid-collective can poison the group
                        pool.close()
                        pool = None
                    rec = {**asdict(res), "shape": shape, "draw": i, "rule": t.get("shapes") or {}}
                    with lock:
                        append_jsonl(args.results, rec)
                        moved = describe(shape, t["sizes"][SIZE])
                        status = "passed" if res.status == "passed" else f"FAILED ({res.reason[:160]})"
                        prog.step(f"ws={ws} {t['task_id']} [{moved}]", status)
            finally:
                if pool is not None:
                    pool.close()

    threads = [threading.Thread(target=worker) for _ in range(max(1, args.jobs))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if items:
        wall = time.monotonic() - t0
        print(f"run: {len(items)} items in {wall:.0f} s with {args.jobs} pools ({wall / len(items):.2f} s per item)")


def failures(args: argparse.Namespace) -> tuple[int, list[tuple[Any, ...]]]:
    """How many of the selected items have a record, and (task, world size, shape, reason) of those that
    failed."""
    items, _ = selected(args)
    args.done = latest_by(args.results, item_key)
    seen, rows = 0, []
    for ws, t, _, shape in items:
        if (rec := recorded(args, ws, t, shape)) is None:
            continue
        seen += 1
        if rec["status"] != "passed":
            rows.append((t["task_id"], ws, describe(shape, t["sizes"][SIZE]), rec["reason"][:200]))
    return seen, rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="mgbench-out", help="generated tasks (manifest.jsonl)")
    p.add_argument("--results", required=True, help="JSONL of held-out shape records (appended, resumed)")
    p.add_argument("--family", action="append", help="only these families (repeatable)")
    p.add_argument("--level", type=int, action="append", help="only these levels (repeatable)")
    p.add_argument("--task", action="append", help="only these task ids (repeatable)")
    p.add_argument("--world-size", type=int, action="append", dest="world_sizes", help="repeatable (default: 2)")
    p.add_argument("--draws", type=int, default=2, help="held-out shapes per task (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="draws and inputs (default: %(default)s)")
    p.add_argument("--jobs", type=int, default=1, help="rank pools at once (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=60.0, help="per-item timeout (default: %(default)s)")
    p.add_argument("--retry-failed", action="store_true", help="check recorded failures again")
    p.add_argument("--summary-only", action="store_true")
    args = p.parse_args()
    args.done = latest_by(args.results, item_key)  # recorded items by (task, module hash, world size, shape)
    if not args.summary_only:
        run(args)
    seen, rows = failures(args)
    print(f"held-out shapes: {seen} items recorded, {seen - len(rows)} passed, {len(rows)} failed")
    if rows:
        print(table(rows, ["task", "world", "shape", "reason"]))


if __name__ == "__main__":
    main()
