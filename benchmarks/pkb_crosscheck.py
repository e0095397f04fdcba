"""ParallelKernelBench's own code judged on our tasks: for every task whose family (or variant) claims a PKB
problem, the peer's reference `solution` (reference/<N>_<name>.py of a checkout) is handed to `mgbench eval` as
a candidate solution, at smoke size on gloo, over fresh seeds and held-out shapes, against our float64 oracle.

A row the peer's code passes at every world size is one where the peer computes what our oracle says on inputs
of our task's kind: the dynamic half of the strict audit (docs/taxonomy.md). A row it fails names the reason
(wrong values, a signature that does not take our inputs, a crash). The peer's code runs only in the
evaluator's child processes, read from the checkout at run time; nothing of it is copied here.

Usage: python benchmarks/pkb_crosscheck.py --pkb /path/to/ParallelKernelBench --tasks OUT
       [--suite pkb] [--world-size 2 --world-size 4] [--row 19 ...] [--json out.json]
OUT is a generator folder (`mgbench generate --suite core --suite pkb --out OUT`). One dtype per family variant
(float32 where offered) unless --all-dtypes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mgbench.paths import child_pythonpath  # noqa: E402
from mgbench.report import table  # noqa: E402
from mgbench.store import load_manifest  # noqa: E402
from mgbench.taxonomy import load_taxonomy  # noqa: E402
from mgbench.taxonomy.peer_coverage import peer_rows  # noqa: E402

PEER = "pkb"


@dataclass
class Check:
    """The peer's code for problem `row` judged on `task_id` at one world size."""

    row: int
    problem: str
    task_id: str
    suite: str
    world_size: int
    status: str  # correct, incorrect, error, timeout, missing (no result)
    reason: str = ""


def claimed_rows(manifest: list[dict], suites: set[str] | None, rows: set[int] | None, all_dtypes: bool):
    """(task record, row) for every task claiming a PKB row (the claims mgbench.taxonomy.peer_coverage reads): one
    dtype per (family, variant, scale) unless all_dtypes, float32 first."""
    claims: dict[str, set[int]] = {}  # "family" or "family/variant" -> the rows it claims
    for row in peer_rows(load_taxonomy(), PEER):
        for who in row.matched_by:
            claims.setdefault(who, set()).add(row.n)
    picked: dict[tuple, dict] = {}
    for rec in manifest:
        if suites and rec.get("suite", "core") not in suites:
            continue
        fam = rec.get("family", "")
        for n in sorted(claims.get(fam, set()) | claims.get(f"{fam}/{rec.get('variant')}", set())):
            if rows and n not in rows:
                continue
            key = (n, fam, rec.get("variant"), rec.get("scale"), rec["dtype"] if all_dtypes else "")
            best = picked.get(key)
            if best is None or (rec["dtype"] == "float32" and best["dtype"] != "float32"):
                picked[key] = rec
    return [(rec, key[0]) for key, rec in sorted(picked.items(), key=lambda kv: (kv[0][0], kv[1]["task_id"]))]


def reference_file(pkb: Path, n: int) -> Path | None:
    hits = [p for p in (pkb / "reference").glob(f"{n}_*.py") if re.fullmatch(rf"{n}_\w+\.py", p.name)]
    return hits[0] if hits else None


def run_batch(tasks_dir: Path, batch: list[tuple[dict, int, Path]], world_sizes: list[int], timeout: float):
    """One `mgbench eval` over a solutions folder holding the peer's file under each task's id; its records."""
    with tempfile.TemporaryDirectory(prefix="pkb-xcheck-") as tmp:
        sols = Path(tmp) / "solutions"
        sols.mkdir()
        for rec, _, ref in batch:
            shutil.copy(ref, sols / f"{rec['task_id']}.py")
        results = Path(tmp) / "results.jsonl"
        cmd = [sys.executable, "-m", "mgbench.cli", "eval", "--tasks", str(tasks_dir), "--solutions-dir", str(sols)]
        cmd += [x for ws in world_sizes for x in ("--world-size", str(ws))]
        cmd += ["--backend", "gloo", "--size", "smoke", "--no-timing", "--no-static", "--trials", "2"]
        cmd += ["--timeout", str(timeout), "--results", str(results)]
        env = {**os.environ, "PYTHONPATH": child_pythonpath(os.environ.get("PYTHONPATH"))}
        subprocess.run(cmd, env=env, cwd=ROOT, check=False)
        return [json.loads(x) for x in results.read_text().splitlines() if x.strip()] if results.is_file() else []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pkb", required=True, type=Path, help="a ParallelKernelBench checkout (reference/ inside)")
    ap.add_argument("--tasks", required=True, type=Path, help="generator OUT folder holding manifest.jsonl")
    ap.add_argument("--suite", action="append", help="only tasks of these suites (repeatable; default: all)")
    ap.add_argument("--row", type=int, action="append", help="only these PKB problem numbers (repeatable)")
    ap.add_argument("--world-size", type=int, action="append", help="default: 2 and 4")
    ap.add_argument("--all-dtypes", action="store_true", help="every dtype, not one per family variant")
    ap.add_argument("--timeout", type=float, default=120.0, help="per-sample timeout in seconds")
    ap.add_argument("--json", type=Path, help="write the checks here")
    args = ap.parse_args(argv)
    if not (args.pkb / "reference").is_dir():
        print(f"pkb_crosscheck: {args.pkb}: no reference/ folder (not a ParallelKernelBench checkout)")
        return 2
    manifest = load_manifest(args.tasks / "manifest.jsonl")
    world_sizes = args.world_size or [2, 4]
    pairs = claimed_rows(manifest, set(args.suite or []), set(args.row or []), args.all_dtypes)
    names = load_taxonomy().peers[PEER].problems
    checks: list[Check] = []
    batches: list[list[tuple[dict, int, Path]]] = []
    for rec, n in pairs:  # a task claiming several rows goes into as many batches (one file per task id)
        ref = reference_file(args.pkb, n)
        if ref is None:
            suite = rec.get("suite", "core")
            checks.append(Check(n, names.get(n, "?"), rec["task_id"], suite, 0, "missing", "no reference file"))
            continue
        slot = next((b for b in batches if all(r["task_id"] != rec["task_id"] for r, _, _ in b)), None)
        if slot is None:
            batches.append(slot := [])
        slot.append((rec, n, ref))
    t0 = time.monotonic()
    for i, batch in enumerate(batches, 1):
        print(f"[batch {i}/{len(batches)}] {len(batch)} tasks ({time.monotonic() - t0:.0f} s elapsed)", flush=True)
        got = {(r["task_id"], r["world_size"]): r for r in run_batch(args.tasks, batch, world_sizes, args.timeout)}
        for rec, n, _ in batch:
            for ws in rec["world_sizes"]:
                if ws not in world_sizes:
                    continue
                r = got.get((rec["task_id"], ws))
                status = r["status"] if r else "missing"
                reason = (r.get("reason") or "")[:160] if r else "no result (not offered at this world size?)"
                checks.append(Check(n, names.get(n, "?"), rec["task_id"], rec.get("suite", "core"), ws, status, reason))
    rows = [[c.row, c.problem, c.task_id, c.suite, c.world_size, c.status, c.reason] for c in checks]
    print(table(rows, ["row", "problem", "task", "suite", "ws", "peer code", "reason"]))
    by_row: dict[int, set[str]] = {}
    for c in checks:
        by_row.setdefault(c.row, set()).add(c.status)
    agree = sorted(n for n, s in by_row.items() if s == {"correct"})
    print(f"\n{len(agree)} of {len(by_row)} PKB rows: the peer's code passes our judge at every world size checked")
    print(f"rows where it does not: {', '.join(str(n) for n in sorted(set(by_row) - set(agree))) or 'none'}")
    if args.json:
        args.json.write_text(json.dumps([asdict(c) for c in checks], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
