"""Full-size correctness of every task on CUDA with ranks sharing one GPU (the shared-gpu backend), in
time-boxed runs that resume where the last stopped; prints GPU-machine seconds per task.

Each run checks (task, world size) items not yet recorded in RESULTS (the oracle, determinism, input
sensitivity and the degenerate-output checks at size `full`, as `mgbench validate` does), with up to
--jobs rank pools at once on the machine's GPUs, and starts no item after --budget-s seconds. A killed
run loses only the items in flight (records are appended one by one). Records are correctness only: the
backend is host-staged gloo, whose times are never results.

Pools share the GPU memory by admission: an item starts when its estimated memory (the ranks' peaks a
record of the task measured at that world size, summed; from another world size, scaled; --memory-from
adds older records) fits what the
running items leave of --memory-fraction of the GPU; an item no record measured is assumed to need
--guess-gib per rank. A pool is restarted after any failed item, so a CUDA error cannot poison the items
after it, and an item that failed for a reason other than a check (out of memory beside other pools, a
CUDA error, a timeout) is tried once more at the end, alone on the GPU (no other item runs and every other
pool is closed first: idle ranks hold GPU memory too); its last record counts. With
--retry-failed, such failures recorded by earlier runs go alone, after that world size's other items.

  PYTHONPATH=. python3 benchmarks/cuda_correctness_pass.py --out mgbench-out --results R.jsonl \\
      --world-size 2 --world-size 4 --jobs 3 --budget-s 540 --done 'results/cuda-shared-*/*.jsonl'
  python3 benchmarks/cuda_correctness_pass.py --out mgbench-out --results R.jsonl --summary-only
"""

from __future__ import annotations

import argparse
import fnmatch
import glob
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mgbench.report import table  # noqa: E402
from mgbench.store import append_jsonl, latest_by, load_manifest, read_jsonl, validation_key  # noqa: E402


def earlier_records(patterns: list[str] | None) -> list[Path]:
    """The record files the --done glob patterns name (committed folders of earlier passes)."""
    return sorted({Path(p) for pattern in patterns or [] for p in glob.glob(pattern)})


def selected(task_id: str, only: list[str] | None, skip: list[str] | None) -> bool:
    """Whether a task id matches one of the --only glob patterns (all when none) and none of --skip."""
    if only and not any(fnmatch.fnmatchcase(task_id, pat) for pat in only):
        return False
    return not any(fnmatch.fnmatchcase(task_id, pat) for pat in skip or [])


def chosen_tasks(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The tasks of OUT that --level, --only and --skip select."""
    return [
        t
        for t in load_manifest(Path(args.out))
        if (not args.level or t.get("level") in args.level) and selected(t["task_id"], args.only, args.skip)
    ]


def offered(t: dict[str, Any], ws: int) -> bool:
    return ws in t.get("world_sizes", [ws])


def _check_key(rec: dict[str, Any]) -> tuple | None:
    """A validation record's key; None for a line of another kind in a pass's folder."""
    return validation_key(rec) if all(k in rec for k in ("task_id", "content_hash", "world_size")) else None


def recorded(args: argparse.Namespace) -> dict:
    """validation key -> the record that counts: a pass in any file, else the newest failure (RESULTS is
    read last: its records are the newest)."""
    done: dict = {}
    for path in [*earlier_records(args.done), Path(args.results)]:
        if path.is_file():
            # eval verdicts (heldout_eval's, copied beside a pass's records) share the key but are no checks;
            # other lines (heldout_eval's triggers file) have no key
            for key, rec in latest_by(path, _check_key).items():
                if key is None or "sample_hash" in rec:
                    continue
                if key not in done or done[key]["status"] != "passed":
                    done[key] = rec
    return done


def _standing_of(rec: dict[str, Any] | None) -> str:
    """A (task, world size)'s column in the standing, from the record that counts (None: never checked)."""
    if rec is None:
        return "unchecked"
    if rec["status"] == "passed":
        return "passed"
    if does_not_fit(rec):
        return "does not fit"
    # out of memory beside other pools, a CUDA error, a timeout: no check has judged the task yet, and
    # --retry-failed runs it again alone (records before `ran_alone` existed land here too)
    return "retry alone" if failed_before_verdict(rec["status"], rec.get("reason", "")) else "failed"


def standing(args: argparse.Namespace) -> str:
    """Where the pass stands for the tasks of OUT at their current content hashes, over RESULTS and the
    earlier passes (--done): per world size, passed / failed (a check's verdict) / retry alone (failed before
    any verdict) / does not fit / unchecked / not offered; then every failure with its reason, and the tasks
    that passed at every world size asked for."""
    done, rows, fails = recorded(args), [], []
    sizes = args.world_sizes or [2]
    tasks = chosen_tasks(args)
    offered_any = [t for t in tasks if any(offered(t, ws) for ws in sizes)]
    passed_all = {t["task_id"] for t in offered_any}
    for ws in sizes:
        count = dict.fromkeys(("passed", "failed", "retry alone", "does not fit", "unchecked", "not offered"), 0)
        for t in tasks:
            if not offered(t, ws):
                count["not offered"] += 1
                continue
            rec = done.get((t["task_id"], t["content_hash"], ws, args.size, args.backend))
            status = _standing_of(rec)
            count[status] += 1
            if status != "passed":
                passed_all.discard(t["task_id"])
            if rec is not None and status != "passed":
                where = f" on {rec.get('hardware')}" if status == "does not fit" else ""
                fails.append(f"ws={ws} {t['task_id']}: {status}{where}: {rec.get('reason', '')[:200]}")
        rows.append((ws, *count.values()))
    text = table(rows, ["world", *count])
    text += f"\n{len(passed_all)} of {len(offered_any)} tasks offered at {sizes} passed at every one of them offered"
    return text + ("\n" + "\n".join(sorted(fails)) if fails else "")


def plan(args: argparse.Namespace, hardware: str | None = None) -> list[tuple[int, dict[str, Any]]]:
    """(world size, task) items of OUT not yet recorded at this size and backend, in RESULTS or in the
    earlier passes' files (--done); a task's record counts only for its current content hash."""
    out = Path(args.out)
    done, tasks = recorded(args), chosen_tasks(args)
    items = []
    for ws in args.world_sizes or [2]:
        for t in tasks:
            if not offered(t, ws):
                continue
            rec = done.get((t["task_id"], t["content_hash"], ws, args.size, args.backend))
            if rec and (rec["status"] == "passed" or not args.retry_failed or does_not_fit(rec, hardware)):
                continue
            # a recorded failure before any verdict (out of memory beside other pools...) is tried alone
            alone = rec is not None and failed_before_verdict(rec["status"], rec.get("reason", ""))
            items.append((ws, {**t, "_path": str(out / t["module"]), "_alone": alone}))
    return items


def schedule(items: list[tuple[int, dict[str, Any]]], need_of: Any) -> dict[int, list]:
    """Per world size, the (estimated bytes, task) queue: items never tried or failed by a check, smallest
    estimate first; then recorded failures before a verdict, with no estimate (None: each runs alone on
    the GPU, after the rest of its world size, where the pools beside it made it fail)."""
    todo: dict[int, list] = {}
    for ws, t in items:
        todo.setdefault(ws, []).append((None if t.get("_alone") else need_of(t, ws), t))
    for queue in todo.values():
        queue.sort(key=lambda it: (it[0] is None, it[0] or 0))
    return todo


CONTEXT_BYTES = 768 * 2**20  # a rank process's CUDA context and allocator slack, beside its tensors


SAME_SIZE_SLACK = 1.1  # over a need measured at the same world size: allocator rounding, another seed's draw


def known_peaks(paths: list[Path]) -> dict[str, dict[int, list[int]]]:
    """task id -> world size -> per-rank peak bytes of the record with the largest total at that size."""
    out: dict[str, dict[int, list[int]]] = {}
    for path in paths:
        if not path.is_file():
            continue
        for r in read_jsonl(path):
            ranks = r.get("peak_memory_bytes") or []
            if not any(ranks):
                continue
            sizes = out.setdefault(r["task_id"], {})
            if sum(ranks) >= sum(sizes.get(r["world_size"], [])):
                sizes[r["world_size"]] = list(ranks)
    return out


def estimate_bytes(task_id: str, ws: int, peaks: dict[str, dict[int, list[int]]]) -> int | None:
    """GPU bytes an item needs with ws ranks on one GPU, or None when no record measured the task.

    Measured at this world size: the ranks' peaks summed (rank 0 holds the whole float64 oracle, the others
    far less: taking the largest rank's peak for every rank made most world-size-8 items look too large to
    share the GPU), with slack. Measured at another size ws0 only: the largest rank once and the largest of
    the others for every other rank, each taken to grow by ws / ws0 (outputs gathered from every rank, the
    oracle's whole problem), an upper bound where inputs are sharded."""
    sizes = peaks.get(task_id)
    if not sizes:
        return None
    if ws in sizes:
        return int(SAME_SIZE_SLACK * (sum(sizes[ws]) + ws * CONTEXT_BYTES))
    ws0 = max((w for w in sizes if w < ws), default=min(sizes))
    ranks = sizes[ws0]
    others = max(ranks[1:], default=ranks[0])
    return int((max(ranks) + (ws - 1) * others) * max(1.0, ws / ws0) + ws * CONTEXT_BYTES)


def failed_before_verdict(status: str, reason: str) -> bool:
    """A failure before any check gave a verdict (out of memory, a CUDA error, a crash, a timeout)."""
    return status != "passed" and reason.split(":")[0] in ("error", "crashed", "timeout", "desync")


def does_not_fit(rec: dict[str, Any], hardware: str | None = None) -> bool:
    """A record of an item that ran out of GPU memory alone on the GPU (no other item, no other pool): the
    task does not fit this world size on that GPU (on `hardware`, when given: a larger card may hold it),
    and trying again there would fail the same way."""
    return (
        bool(rec.get("ran_alone"))
        and rec["status"] != "passed"
        and "OutOfMemoryError" in rec.get("reason", "")
        and (hardware is None or rec.get("hardware") == hardware)
    )


def infrastructure_failure(res: Any) -> bool:
    """failed_before_verdict of a validation result."""
    return failed_before_verdict(res.status, res.reason)


class MemoryGate:
    """Admits items while their estimated bytes fit the budget; an unknown or oversized item waits until
    nothing else runs and no other rank pool is open, then runs alone.

    An idle pool's ranks still hold GPU memory (a CUDA context and cached blocks each: 0.8 to 1.7 GiB a rank
    at world size 8, measured in pass 12, where items retried "alone" beside another pool's idle ranks ran out
    of memory). So a caller waiting in acquire() with a pool open hands over a close_pool callback, which the
    gate calls before it waits for an item that runs alone (its own or another caller's); while such an item
    waits, no other item is admitted ahead of it."""

    def __init__(self, budget: int):
        self.budget, self.used, self.running = budget, 0, 0
        self.pools_open, self.alone_waiting = 0, 0
        self.cond = threading.Condition()

    def _take(self, need: int | None) -> int:
        return self.budget if need is None or need > self.budget else need

    def _fits(self, take: int) -> bool:
        if take >= self.budget:
            return self.running == 0 and self.pools_open == 0
        return self.alone_waiting == 0 and (self.running == 0 or self.used + take <= self.budget)

    def acquire(self, need: int | None, close_pool: Callable[[], None] | None = None) -> int:
        """Wait until the item fits; the bytes it took. close_pool: the caller's open pool, closed (outside the
        lock) if the caller must wait for an item that runs alone."""
        take = self._take(need)
        alone = take >= self.budget
        with self.cond:
            if alone:
                self.alone_waiting += 1
                self.cond.notify_all()  # callers waiting for room with a pool open must close it now
            try:
                while not self._fits(take):
                    if close_pool is not None and (alone or self.alone_waiting):
                        self.cond.release()  # closing a pool takes seconds: let the others go on meanwhile
                        try:
                            close_pool()
                        finally:
                            self.cond.acquire()
                        close_pool = None
                        continue
                    self.cond.wait()
            finally:
                if alone:
                    self.alone_waiting -= 1
                    self.cond.notify_all()
            self.used += take
            self.running += 1
        return take

    def acquire_would_block(self, need: int) -> bool:
        """Whether acquire(need) would wait now."""
        with self.cond:
            return not self._fits(self._take(need))

    def release(self, took: int) -> None:
        with self.cond:
            self.used -= took
            self.running -= 1
            self.cond.notify_all()

    def pool_opened(self) -> None:
        with self.cond:
            self.pools_open += 1

    def pool_closed(self) -> None:
        with self.cond:
            self.pools_open -= 1
            self.cond.notify_all()


def run(args: argparse.Namespace) -> None:
    import torch

    from mgbench.validation.pool import RankPool
    from mgbench.validation.run import ValidationResult, check_task

    results = Path(args.results)
    on_gpu = torch.cuda.is_available() and args.backend != "gloo"
    hardware = torch.cuda.get_device_name(0) if on_gpu else "cpu"
    items = plan(args, hardware)
    gpus = f"{torch.cuda.device_count()} x {hardware}" if on_gpu else "CPU"
    print(f"{len(items)} (task, world size) items to check on {gpus}, {args.backend}, {args.size}", flush=True)
    t0 = time.monotonic()
    peaks = known_peaks([results, *earlier_records(args.done), *map(Path, args.memory_from or [])])
    if on_gpu:
        budget = int(torch.cuda.mem_get_info(0)[1] * args.memory_fraction)
    else:
        budget = 1 << 62  # CPU dry run: no GPU memory to share
    gate = MemoryGate(budget)
    guess = int(args.guess_gib * 2**30)

    def need_of(t: dict[str, Any], ws: int) -> int:
        known = estimate_bytes(t["task_id"], ws, peaks)
        return known if known is not None else ws * (guess + CONTEXT_BYTES)

    # per world size, items smallest estimate first; retries (need None: alone) join at the end
    todo = schedule(items, need_of)
    lock = threading.Lock()
    counts = {"done": 0, "pool_starts": 0, "pool_start_s": 0.0}

    def next_item(ws: int):
        with lock:
            return todo[ws].pop(0) if todo[ws] else None

    def worker() -> None:
        pool = None

        def close_pool() -> None:
            nonlocal pool
            if pool is not None:
                closing, pool = pool, None
                try:
                    closing.close()
                finally:  # counted closed even if closing failed: else an item to run alone waits forever
                    gate.pool_closed()

        def check_one(ws: int, t: dict[str, Any]) -> Any:
            nonlocal pool
            try:
                if pool is None:
                    started = time.monotonic()
                    pool = RankPool(ws, args.backend, pg_timeout_s=max(2 * args.timeout, 120)).__enter__()
                    gate.pool_opened()
                    with lock:
                        counts["pool_starts"] += 1
                        counts["pool_start_s"] += time.monotonic() - started
                return check_task(pool, t, args.size, hardware, 0, args.timeout)
            except Exception as e:  # noqa: BLE001 -- e.g. a pool that would not start: a record, not a lost worker
                reason = f"error: {type(e).__name__}: {e}"[:2000]
                return ValidationResult(
                    t["task_id"],
                    t["content_hash"],
                    ws,
                    args.size,
                    args.backend,
                    hardware,
                    "failed",
                    reason,
                    finished_at=round(time.time(), 3),
                )

        for ws in sorted(todo):
            try:
                while time.monotonic() - t0 < args.budget_s and (item := next_item(ws)) is not None:
                    need, t = item
                    took = gate.acquire(need if on_gpu else 0, close_pool if pool is not None else None)
                    try:
                        res = check_one(ws, t)
                        if res.status != "passed":  # a CUDA error or OOM can poison the ranks
                            close_pool()
                    finally:
                        gate.release(took)
                    ran_alone = on_gpu and took >= gate.budget  # unknown, oversized or a retry
                    if infrastructure_failure(res) and need is not None and not ran_alone:
                        with lock:
                            todo[ws].append((None, t))  # once more, alone on the GPU
                    with lock:
                        append_jsonl(results, {**asdict(res), "ran_alone": ran_alone})
                        counts["done"] += 1
                        peak = max(res.peak_memory_bytes or [0]) / 2**30
                        est = "?" if need is None else f"{need / 2**30:.1f}"
                        phases = res.phase_seconds or {}
                        slowest = max(phases, key=phases.get, default=None)
                        most = f" ({slowest} {phases[slowest]:.1f}s)" if slowest else ""
                        print(
                            f"[{counts['done']}/{len(items)} at {time.monotonic() - t0:.0f}s] ws={ws} "
                            f"{t['task_id']} {res.status} "
                            f"{res.seconds:.1f}s{most} peak {peak:.2f} GiB/rank (est {est} GiB) {res.reason[:160]}",
                            flush=True,
                        )
            finally:
                close_pool()

    threads = [threading.Thread(target=worker) for _ in range(args.jobs)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.monotonic() - t0
    print(f"run: {counts['done']} items in {wall:.0f} s with {args.jobs} pools", flush=True)
    # where the wall time goes besides the checks: starting rank pools (again after a failure or a wait)
    print(f"run: {counts['pool_starts']} pool starts, {counts['pool_start_s']:.0f} s starting them", flush=True)
    if counts["done"]:
        machine = "GPU-machine" if on_gpu else "CPU (a dry run, not a GPU cost)"
        print(f"run: {wall / counts['done']:.2f} {machine} seconds per item", flush=True)


def summary(results: Path) -> str:
    """Per world size: passed, failed, item seconds (median, max), peak memory per rank; the failures."""
    latest = latest_by(results, lambda r: (r["task_id"], r["world_size"]))
    rows, fails = [], []
    for ws in sorted({r["world_size"] for r in latest.values()}):
        recs = [r for r in latest.values() if r["world_size"] == ws]
        secs = [r["seconds"] for r in recs]
        peaks = [max(r.get("peak_memory_bytes") or [0]) / 2**30 for r in recs]
        passed = sum(r["status"] == "passed" for r in recs)
        rows.append(
            (
                ws,
                len(recs),
                passed,
                len(recs) - passed,
                f"{statistics.median(secs):.1f}",
                f"{max(secs):.1f}",
                f"{max(peaks):.1f}",
            )
        )
        fails += [f"ws={ws} {r['task_id']}: {r['reason']}" for r in recs if r["status"] != "passed"]
    text = table(rows, ["world", "checked", "passed", "failed", "median s", "max s", "max GiB/rank"])
    by_phase: dict[str, float] = {}
    for r in latest.values():
        for phase, secs in (r.get("phase_seconds") or {}).items():
            by_phase[phase] = by_phase.get(phase, 0.0) + secs
    if total := sum(by_phase.values()):
        text += "\ntime by check phase (slowest rank): " + ", ".join(
            f"{phase} {100 * secs / total:.0f}%" for phase, secs in sorted(by_phase.items(), key=lambda kv: -kv[1])
        )
    return text + ("\n" + "\n".join(sorted(fails)) if fails else "")


def file_into(results: Path, folder: Path) -> str:
    """Commit a run's records to a results folder the way `mgbench publish` reads them: passed records to
    validation-shared-gpu.jsonl (read as correctness-only records), failures to failures.jsonl (kept for the
    account; a failure before a verdict, such as out of memory beside other pools, says nothing of the task
    and must not stop it being published), and a correctness.json marker if the folder has none."""
    rows = list(read_jsonl(results))
    folder.mkdir(parents=True, exist_ok=True)
    for r in rows:
        append_jsonl(folder / ("validation-shared-gpu.jsonl" if r["status"] == "passed" else "failures.jsonl"), r)
    marker = folder / "correctness.json"
    if not marker.exists():
        gpus = sorted({r.get("hardware", "") for r in rows})
        info = {"backend": "shared-gpu", "correctness_only": True, "gpu": ", ".join(gpus)}
        marker.write_text(json.dumps(info) + "\n")
    passed = sum(r["status"] == "passed" for r in rows)
    return f"{results} -> {folder}: {passed} passed, {len(rows) - passed} failed"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="mgbench-out", help="generated tasks (manifest.jsonl)")
    p.add_argument("--results", required=True, help="JSONL of validation records (appended, resumed)")
    p.add_argument("--world-size", type=int, action="append", dest="world_sizes")
    p.add_argument("--level", type=int, action="append")
    p.add_argument("--only", action="append", help="glob of task ids to check (repeatable; default: all)")
    p.add_argument("--skip", action="append", help="glob of task ids not to check (repeatable)")
    p.add_argument("--backend", default="shared-gpu", help="default: %(default)s (gloo: a CPU dry run)")
    p.add_argument("--size", default="full", help="default: %(default)s")
    p.add_argument("--jobs", type=int, default=1, help="rank pools at once (default: %(default)s)")
    p.add_argument("--budget-s", type=float, default=540.0, help="start no item after this (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=120.0, help="per-item timeout (default: %(default)s)")
    p.add_argument(
        "--retry-failed",
        action="store_true",
        help="check recorded failures again (those before a verdict alone, after their world size's others)",
    )
    p.add_argument(
        "--done",
        action="append",
        help="glob of earlier passes' record files (repeatable): their items are not checked again (failed "
        "ones with --retry-failed), their peak memory sizes the items",
    )
    p.add_argument("--memory-from", action="append", help="older records whose peak memory sizes the items")
    p.add_argument(
        "--memory-fraction", type=float, default=0.85, help="GPU memory pools may share (default: %(default)s)"
    )
    p.add_argument(
        "--guess-gib", type=float, default=8.0, help="per-rank GiB of a task no record measured (default: %(default)s)"
    )
    p.add_argument("--summary-only", action="store_true", help="print the summary of RESULTS; run nothing")
    p.add_argument(
        "--standing",
        action="store_true",
        help="print where OUT's tasks stand at their current hashes over RESULTS and --done; run nothing",
    )
    p.add_argument(
        "--file-into",
        metavar="FOLDER",
        help="append RESULTS to a results/cuda-shared-*/ folder as publish reads it (passes and failures apart); "
        "run nothing",
    )
    return p.parse_args(argv)


def main() -> None:
    args = parse_args()
    if args.file_into:
        print(file_into(Path(args.results), Path(args.file_into)))
        return
    if args.standing:
        print(standing(args))
        return
    if not args.summary_only:
        run(args)
    if Path(args.results).exists() and any(True for _ in read_jsonl(args.results)):
        print(summary(Path(args.results)))


if __name__ == "__main__":
    main()
