"""Time `generate` and CPU/gloo `validate` over the whole suite; prints tasks/s and s/task.

Usage: python benchmarks/pipeline_cpu.py [--world-size 2 --world-size 4] [--out DIR]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from mgbench.generator import generate
from mgbench.report import table
from mgbench.validation.run import validate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--world-size", type=int, action="append", dest="world_sizes")
    ap.add_argument("--out", help="work folder (default: a temporary one, removed after)")
    ap.add_argument("--level", type=int, action="append")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="mgbench-bench-"))
    results = out / "bench-results.jsonl"
    if results.exists():
        results.unlink()
    rows = []
    t0 = time.perf_counter()
    records, _ = generate(out, levels=args.level)
    gen_s = time.perf_counter() - t0
    rows.append(("generate", len(records), gen_s, len(records) / gen_s, gen_s / len(records)))
    for ws in args.world_sizes or [2, 4]:
        t0 = time.perf_counter()
        res = validate(out, results, world_sizes=[ws], quiet=True)
        s = time.perf_counter() - t0
        passed = sum(r.status == "passed" for r in res)
        rows.append((f"validate ws={ws} ({passed} passed)", len(res), s, len(res) / s, s / max(1, len(res))))
    print(table(rows, ["stage", "tasks", "seconds", "tasks/s", "s/task"]))
    if not args.out:
        shutil.rmtree(out)


if __name__ == "__main__":
    main()
