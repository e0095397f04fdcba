"""CLI subcommand of the dataset stage: `publish` (a local folder)."""
from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("publish", help="build the Hugging Face dataset folder from validated tasks",
                       description="Write parquet shards and a dataset card for every task that "
                                   "passed validation.")
    p.add_argument("--out", default="mgbench-out", help="pipeline folder (default: %(default)s)")
    p.add_argument("--folder", help="dataset folder (default: OUT/dataset)")
    p.add_argument("--results", action="append", help="result JSONL files (default: OUT/results/*.jsonl)")
    p.set_defaults(func=cmd_publish)


def cmd_publish(args: argparse.Namespace) -> int:
    from dataset.build import build_dataset
    out = Path(args.out)
    results = args.results or sorted(str(p) for p in (out / "results").glob("*.jsonl"))
    folder, n, excluded = build_dataset(out, Path(args.folder) if args.folder else out / "dataset", results)
    for tid, why in excluded:
        print(f"excluded {tid}: {why}")
    print(f"dataset: {n} tasks in {folder.resolve()}")
    return 0
