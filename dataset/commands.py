"""CLI subcommand of the dataset stage: `publish` (a local folder, and optionally the Hub)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "publish",
        help="build the Hugging Face dataset folder and push it to the Hub",
        description="Write parquet shards, plots and the dataset card for every task "
        "that passed validation, merging per-hardware GPU results "
        "(results/<tag>/); with --push, upload the folder to the Hub in one "
        "commit and tag the release. Refuses a set with failed tasks.",
    )
    p.add_argument("--out", default="mgbench-out", help="pipeline folder (default: %(default)s)")
    p.add_argument("--folder", help="dataset folder (default: OUT/dataset)")
    p.add_argument("--results", action="append", help="validation JSONL files (default: OUT/results/*.jsonl)")
    p.add_argument(
        "--results-root",
        action="append",
        dest="results_roots",
        help="folder holding <hardware-tag>/ result folders (repeatable; default: the "
        "repository's results/ and OUT/results)",
    )
    p.add_argument(
        "--push", metavar="ORG/NAME", help="Hub dataset repo to push to (token: HF_TOKEN, endpoint: HF_ENDPOINT)"
    )
    p.add_argument("--dry-run", action="store_true", help="write the folder only, push nothing")
    p.add_argument("--private", action="store_true", help="create the Hub repo private")
    p.add_argument("--max-shard-rows", type=int, help="rows per parquet shard at most")
    p.add_argument("--max-shard-bytes", type=int, help="bytes (row JSON) per parquet shard at most")
    p.set_defaults(func=cmd_publish)


def cmd_publish(args: argparse.Namespace) -> int:
    from mgbench.dataset import shards
    from mgbench.dataset.build import write_dataset

    out = Path(args.out)
    results = args.results or sorted(str(p) for p in (out / "results").glob("*.jsonl"))
    rep = write_dataset(
        out,
        Path(args.folder) if args.folder else out / "dataset",
        results,
        results_roots=args.results_roots,
        repo_id=args.push,
        max_shard_rows=args.max_shard_rows or shards.MAX_SHARD_ROWS,
        max_shard_bytes=args.max_shard_bytes or shards.MAX_SHARD_BYTES,
    )
    rs = rep.rowset
    if rep.lost:
        print(
            f"WARNING: the dataset lost {len(rep.lost)} task(s) that {rep.folder} held before "
            f"({len(rep.rows)} now): {', '.join(rep.lost[:10])}{' ...' if len(rep.lost) > 10 else ''}; "
            "they are not in OUT's manifest or not validated (a filtered `generate --replace`?)",
            file=sys.stderr,
        )
    if rs.not_validated:
        print(f"left out {len(rs.not_validated)} task(s) never validated: {', '.join(rs.not_validated)}")
    if rs.stale_baselines:
        print(f"ignored {rs.stale_baselines} baseline line(s) of older task versions (content hash changed)")
    timed = sum(bool(r["baselines"]) for r in rep.rows)
    print(
        f"dataset {rep.version}: {len(rep.rows)} tasks ("
        + ", ".join(f"{s.name} {s.num_examples}" for s in rep.splits.values())
        + f"), {timed} with baselines on {len(rs.hardware)} machine(s), in {rep.folder.resolve()}"
    )
    if args.push and args.dry_run:
        print(
            f"dry run: would push {len(rep.files)} file(s) to {args.push} in one commit and tag "
            f"{rep.version.tag} (Hub files not listed here are deleted); nothing pushed:"
        )
        for path in rep.files:
            print(f"  {path}")
        return 0
    if not args.push:
        print("not pushed (use --push ORG/NAME)")
        return 0
    from mgbench.dataset.hub import push_folder

    pr = push_folder(rep.folder, rep.files, args.push, rep.version.tag, f"mgbench {rep.version}", private=args.private)
    print(
        f"pushed to {pr.repo_id}: "
        + (f"commit {pr.commit}" if pr.commit else "no change, no commit")
        + f"; {len(pr.uploaded)} uploaded, {len(pr.deleted)} deleted, {len(pr.unchanged)} unchanged; "
        + f"tag {pr.tag} "
        + ("created" if pr.tag_created else "already there")
    )
    for path in pr.uploaded:
        print(f"  uploaded {path}")
    for path in pr.deleted:
        print(f"  deleted  {path}")
    return 0
