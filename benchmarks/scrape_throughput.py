"""Scraper throughput: Python files and MB per minute over a real checkout, on N worker processes.

Times the whole scan of one tree (walk, prefilter, libcst parse, resolution, scope closure,
classification, hashing, kernel index) without writing outputs. Reports wall-clock rates and
CPU-time rates (workers' CPU from getrusage), plus the load average, because a shared machine
slows the wall clock: files per CPU-minute x processes is what the same run gets on idle cores.

  PYTHONPATH=. python3 benchmarks/scrape_throughput.py /path/to/Megatron-LM --processes 2
  PYTHONPATH=. python3 benchmarks/scrape_throughput.py /tmp/src/* --json results/scrape_tp.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mgbench.scrapers.classify import load_ids  # noqa: E402
from mgbench.scrapers.scan import scan_tree  # noqa: E402
from mgbench.scrapers.tree import describe  # noqa: E402


def cpu_seconds() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def measure(root: Path, processes: int, kernels: bool) -> dict:
    tax = load_ids()
    tree = describe(root)
    load0 = os.getloadavg()[0]
    c0, t0 = cpu_seconds(), time.monotonic()
    scan = scan_tree(tree, tax, {"deepspeed.comm": "torch.distributed"}, processes=processes, kernels=kernels)
    wall, cpu = time.monotonic() - t0, cpu_seconds() - c0
    f = scan.funnel
    mb = f.bytes_scanned / 1e6
    return {
        "tree": str(root),
        "processes": processes,
        "py_files": f.files_scanned,
        "MB": round(mb, 2),
        "parsed": f.files_prefiltered,
        "with_collectives": f.files_with_collectives,
        "functions": f.functions_extracted,
        "kernels": f.kernels,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "files_per_min": round(f.files_scanned / wall * 60),
        "MB_per_min": round(mb / wall * 60, 1),
        "files_per_cpu_min": round(f.files_scanned / cpu * 60) if cpu else None,
        "load_avg_1m": round(load0, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trees", nargs="+", help="checkouts or folders to scan")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--no-kernels", action="store_true")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    args = ap.parse_args()
    rows = [measure(Path(t), args.processes, not args.no_kernels) for t in args.trees]
    cols = [
        "py_files",
        "MB",
        "parsed",
        "functions",
        "wall_s",
        "cpu_s",
        "files_per_min",
        "MB_per_min",
        "files_per_cpu_min",
        "load_avg_1m",
    ]
    print("tree".ljust(28) + "".join(c.rjust(18) for c in cols))
    for r in rows:
        print(Path(r["tree"]).name[:27].ljust(28) + "".join(str(r[c]).rjust(18) for c in cols))
    files = sum(r["py_files"] for r in rows)
    wall = sum(r["wall_s"] for r in rows)
    cpu = sum(r["cpu_s"] for r in rows)
    mb = sum(r["MB"] for r in rows)
    print(
        f"\nall: {files} Python files, {mb:.1f} MB in {wall:.1f}s wall on {args.processes} processes: "
        f"{files / wall * 60:.0f} files/min, {mb / wall * 60:.1f} MB/min; "
        f"{files / cpu * 60:.0f} files per CPU-minute"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
