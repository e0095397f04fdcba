"""`mgbench scrape harness` (harness synthesis for mined candidates: driver.py), `scrape settle` (run/settle_run.py)
and `scrape crosscheck` (run/crosscheck.py)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(ss: argparse._SubParsersAction, default_out: str) -> None:
    h = ss.add_parser("harness", help="synthesize input harnesses for candidates (sandboxed, gloo ws 2 and 4)")
    h.add_argument("--out", default=default_out, help="scrape folder with candidates.jsonl (default: %(default)s)")
    h.add_argument("--results", help="folder for harness.jsonl (default: the scrape folder)")
    h.add_argument("--jobs", type=int, default=1, help="candidates in flight (each runs 2-4 rank processes)")
    h.add_argument("--limit", type=int, help="at most this many new candidates (seeded random sample)")
    h.add_argument("--id", action="append", help="only these candidate ids (repeatable)")
    h.add_argument("--seconds", type=float, default=30.0, help="search budget per candidate (s)")
    h.add_argument("--attempts", type=int, default=30, help="search budget per candidate (runs)")
    h.add_argument("--src", help="folder of the repositories' checkouts (SRC/<name>): inline repository helpers")
    h.add_argument(
        "--inline-lines",
        type=int,
        default=None,
        help="most repository lines inlined per candidate (default: mgbench.scrapers.harness.make.inline.MAX_LINES)",
    )
    h.add_argument(
        "--trace",
        action="store_true",
        help="print every attempt's spec, the rules that proposed it and its outcome (with --id)",
    )
    h.add_argument("--report", action="store_true", help="only print the yield report")
    h.add_argument("--quiet", action="store_true")
    h.set_defaults(func=cmd_harness)
    st = ss.add_parser(
        "settle",
        help="level 4: settle accepted harnesses (output mode, mutated inputs, full size by bytes per rank)",
        description="For every accepted result of HARNESS whose spec lacks the settled keys, run its task on "
        "2 sandboxed gloo ranks and decide how the output is formed, which inputs the entry changes and the "
        "full size by bytes per rank (scrapers/harness/run/settle.py). Resumable: settled records are appended "
        "as they finish; the file is compacted atomically at the end. Exit code 1 when a record could not "
        "be settled (one line each).",
    )
    st.add_argument("--harness", required=True, help="harness.jsonl to settle (rewritten in place)")
    st.add_argument("--out", default=default_out, help="scrape folder with candidates.jsonl (default: %(default)s)")
    st.add_argument("--jobs", type=int, default=1, help="records in flight (each runs 2 rank processes)")
    st.add_argument("--limit", type=int, help="settle at most this many records this run")
    st.add_argument("--quiet", action="store_true")
    st.set_defaults(func=cmd_settle)
    c = ss.add_parser("crosscheck", help="level-4 tasks: outputs on BACKEND agree with the gloo fingerprints")
    c.add_argument("--out", default="mgbench-out", help="folder with manifest.jsonl (default: %(default)s)")
    c.add_argument("--world-size", type=int, default=2)
    c.add_argument("--backend", choices=["gloo", "nccl"], default="nccl")
    c.add_argument("--results", help="JSONL (default: OUT/results/crosscheck-BACKEND.jsonl)")
    c.add_argument("--timeout", type=float, default=60.0, help="seconds per task")
    c.set_defaults(func=cmd_crosscheck)


def cmd_harness(args: argparse.Namespace) -> int:
    from mgbench.scrapers.harness.driver import report, run
    from mgbench.scrapers.harness.inputs.search import Budget

    if not args.report:
        run(
            Path(args.out),
            args.results,
            args.jobs,
            args.limit,
            Budget(args.seconds, args.attempts),
            args.id,
            quiet=args.quiet,
            src=args.src,
            inline_lines=args.inline_lines,
            trace=args.trace,
        )
    print(report(Path(args.out), args.results))
    return 0


def cmd_settle(args: argparse.Namespace) -> int:
    import sys

    from mgbench.scrapers.harness.run.settle_run import settle_file, unsettled

    done, bad = settle_file(Path(args.harness), Path(args.out), args.jobs, args.limit, args.quiet)
    for line in bad:
        print(line, file=sys.stderr)
    left = len(unsettled(Path(args.harness)))
    print(f"settled {done} record(s); {left} accepted record(s) still unsettled in {args.harness}")
    return 1 if bad else 0


def cmd_crosscheck(args: argparse.Namespace) -> int:
    from mgbench.scrapers.harness.run.crosscheck import run

    recs = run(Path(args.out), args.world_size, args.backend, args.results and Path(args.results), args.timeout)
    return 0 if all(r["agree"] for r in recs) else 1
