"""CLI subcommands `eval` (score candidate solutions on rank processes) and `score` (metrics).

Exit codes of `eval`: 0 correct, 1 incorrect (wrong output, integrity or static rejection), 2 error
or timeout (the candidate raised, crashed or hung, or the harness could not run). With
--solutions-dir the worst status of the samples evaluated in this run decides.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from validation.eval import EXIT_CORRECT, EXIT_ERROR, EXIT_INCORRECT
from validation.executors.options import add_executor_args


def register(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("eval", help="evaluate candidate solutions (correctness, anti-cheat, speedup)",
                       description="Run a candidate solution of a task on fresh rank processes: static "
                                   "checks, correctness on every rank over fresh seeds, integrity checks, "
                                   "then timing against the reference and the recorded baselines. Exit "
                                   "codes: 0 correct, 1 incorrect, 2 error/timeout.")
    src = e.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", help="dataset folder or Hugging Face Hub id (needs `datasets`)")
    src.add_argument("--tasks", help="generator OUT folder holding manifest.jsonl")
    e.add_argument("--task", help="task id (default: from the solution file name, <task_id>[@k].py)")
    what = e.add_mutually_exclusive_group(required=True)
    what.add_argument("--solution", help="solution file defining solution(...) like the reference")
    what.add_argument("--solutions-dir", help="folder of <task_id>.py / <task_id>@<k>.py files (batch mode)")
    e.add_argument("--world-size", type=int, default=2)
    e.add_argument("--trials", type=int, default=5, help="correctness trials, a fresh seed each (default 5)")
    e.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"])
    e.add_argument("--size", help="size class (default: smoke on gloo, full on nccl)")
    e.add_argument("--timeout", type=float, help="seconds per phase (default: 60 on gloo, 300 on nccl)")
    e.add_argument("--budget", type=float, default=1.0, help="timing budget per timed function, seconds")
    e.add_argument("--min-iters", type=int, default=50, help="timed iterations at least (default 50)")
    e.add_argument("--seed", type=int, help="base seed (default: random, recorded in the result)")
    e.add_argument("--no-static", action="store_true", help="skip the libcst static checks")
    e.add_argument("--require-static", action="store_true", help="fail when libcst is missing")
    e.add_argument("--no-timing", action="store_true", help="correctness only")
    e.add_argument("--baselines", action="append", default=[], help="baselines.jsonl files (repeatable)")
    e.add_argument("--hardware", help="hardware tag of the baselines to compare with (default: all)")
    e.add_argument("--max-speedup", type=float, default=10.0, help="flag speedups above this for review")
    e.add_argument("--results", help="append result records to this JSONL (batch default: DIR/eval-results.jsonl)")
    e.add_argument("--retry-errors", action="store_true", help="batch: re-run samples that errored or timed out")
    e.add_argument("--json", action="store_true", help="print the result record(s) as JSON")
    add_executor_args(e)
    e.set_defaults(func=cmd_eval)

    s = sub.add_parser("score", help="pass@k, fast_p@k, speedups and a plot from eval results",
                       description="Aggregate eval results: pass@k (unbiased), fast_p@k for p in 1, 1.5, "
                                   "2, geometric-mean speedup of correct solutions, roofline fraction, by "
                                   "level and parallelism dimension; writes a PNG of tasks solved vs speedup.")
    s.add_argument("results", nargs="+", help="eval results JSONL file(s)")
    s.add_argument("--k", type=int, action="append", help="k values (default: 1, 5, 10, 100 up to the samples)")
    s.add_argument("--baseline", default="reference",
                   help="speedup basis: reference (same run, default) or a recorded baseline, e.g. eager")
    s.add_argument("--exclude-flagged", action="store_true", help="count samples flagged for review as wrong")
    s.add_argument("--plot", help="PNG path (default: <first results file>-solved.png)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_score)


def _options(args: argparse.Namespace):
    from validation.eval.runner import EvalOptions
    backend = args.backend
    if backend == "auto":
        import torch
        backend = "nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= args.world_size else "gloo"
    return EvalOptions(
        world_size=args.world_size, backend=backend, size=args.size or ("full" if backend == "nccl" else "smoke"),
        trials=args.trials, timeout_s=args.timeout or (300.0 if backend == "nccl" else 60.0),
        budget_s=args.budget, min_iters=args.min_iters, seed=args.seed, static=not args.no_static,
        require_static=args.require_static, timing=not args.no_timing, max_speedup=args.max_speedup,
        hardware=args.hardware)


def _exit_code(recs: list[dict]) -> int:
    statuses = {r["status"] for r in recs}
    if statuses & {"error", "timeout"}:
        return EXIT_ERROR
    return EXIT_INCORRECT if "incorrect" in statuses else EXIT_CORRECT


def cmd_eval(args: argparse.Namespace) -> int:
    from validation.eval.report import batch_table, describe
    from validation.eval.tasks import load_tasks
    from validation.store import append_jsonl
    opts = _options(args)
    tasks = load_tasks(args.dataset, args.tasks, args.baselines)
    if args.solutions_dir:
        from validation.eval.batch import run_batch
        results = args.results or str(Path(args.solutions_dir) / "eval-results.jsonl")
        if args.executor:
            from validation.executors.cli import run_eval
            recs, skipped, warnings = run_eval(args, tasks, opts, Path(results))
        else:
            recs, skipped, warnings = run_batch(args.solutions_dir, tasks, results, opts, args.retry_errors,
                                                quiet=args.json)
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
        if args.json:
            print(json.dumps(recs, indent=1, sort_keys=True))
        else:
            if recs:
                print(batch_table(recs))
            print(f"{len(recs)} evaluated, {skipped} already in {results} (skipped); results: {results}")
        return _exit_code(recs)
    sol = Path(args.solution)
    if not sol.is_file():
        raise FileNotFoundError(f"{sol}: solution file not found")
    from validation.eval.batch import task_of
    tid = args.task or task_of(sol)
    if tid not in tasks:
        raise ValueError(f"unknown task {tid!r} (pass --task; e.g. {sorted(tasks)[:3]})")
    task = tasks[tid]
    if task.world_sizes and opts.world_size not in task.world_sizes:
        raise ValueError(f"task {tid} supports world sizes {task.world_sizes}, not {opts.world_size}")
    from validation.eval.runner import evaluate
    rec = evaluate(task, sol, opts)
    if args.results:
        append_jsonl(args.results, rec)
    print(json.dumps(rec, indent=1, sort_keys=True) if args.json else describe(rec))
    return _exit_code([rec])


def cmd_score(args: argparse.Namespace) -> int:
    from validation.eval.score import format_table, plot, score
    summary, groups = score(args.results, args.k, args.baseline, args.exclude_flagged)
    png = Path(args.plot) if args.plot else Path(args.results[0]).with_name(Path(args.results[0]).stem + "-solved.png")
    try:
        plot(groups, png, args.baseline)
        plotted = str(png)
    except ImportError:
        plotted = "skipped (matplotlib is not installed)"
    if args.json:
        print(json.dumps({"groups": summary, "plot": plotted}, indent=1, sort_keys=True))
    else:
        print(format_table(summary))
        print(f"speedup basis: {args.baseline}; plot: {plotted}")
    return 0
