"""CLI subcommands `eval` (score candidate solutions on rank processes) and `score` (metrics).

Exit codes of `eval`: 0 correct, 1 incorrect (wrong output, integrity or static rejection), 2 error
or timeout (the candidate raised, crashed or hung, or the harness could not run; also bad input: a
folder that is not a task set, an unreachable Hub id). A candidate is judged at every world size
its task supports that the machine can run (mgbench.validation.eval.worldsizes) unless --world-size is
given; the worst status decides. With --solutions-dir the worst status over every sample of the
folder (evaluated now or by an earlier run) decides, so a re-run answers the same.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path

from mgbench import backends
from mgbench.validation.contract import require_size_class
from mgbench.validation.eval import EXIT_CORRECT, EXIT_ERROR, EXIT_INCORRECT
from mgbench.validation.executors.options import add_executor_args


def register(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser(
        "eval",
        help="evaluate candidate solutions (correctness, anti-cheat, speedup)",
        description="Run a candidate solution of a task on fresh rank processes: static "
        "checks, correctness on every rank over fresh seeds, integrity checks, "
        "then timing against the reference and the recorded baselines. Exit "
        "codes: 0 correct, 1 incorrect, 2 error/timeout.",
    )
    src = e.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", help="dataset folder or Hugging Face Hub id (needs `datasets`)")
    src.add_argument("--tasks", help="generator OUT folder holding manifest.jsonl")
    e.add_argument("--task", help="task id (default: from the solution file name, <task_id>[@k].py)")
    what = e.add_mutually_exclusive_group(required=True)
    what.add_argument("--solution", help="solution file defining solution(...) like the reference")
    what.add_argument("--solutions-dir", help="folder of <task_id>.py / <task_id>@<k>.py files (batch mode)")
    e.add_argument(
        "--world-size",
        type=int,
        action="append",
        help="world size to judge at (repeatable; default: every world size the task supports "
        "that this machine can run: NCCL one rank per GPU, gloo at least 2 and 4)",
    )
    e.add_argument("--trials", type=int, default=5, help="correctness trials, a fresh seed each (default 5)")
    e.add_argument(
        "--backend",
        default="auto",
        choices=["auto", *backends.NAMES],
        help="auto: nccl with a GPU per rank, else gloo; " + backends.help_text(),
    )
    e.add_argument("--size", help="size class (default: smoke on gloo, full on GPUs)")
    e.add_argument("--timeout", type=float, help="seconds per phase (default: 60 on gloo, 300 on GPUs)")
    e.add_argument("--budget", type=float, default=1.0, help="timing budget per timed function, seconds")
    e.add_argument("--min-iters", type=int, default=50, help="timed iterations at least (default 50)")
    e.add_argument("--seed", type=int, help="base seed (default: random, recorded in the result)")
    e.add_argument("--no-static", action="store_true", help="skip the libcst static checks")
    e.add_argument("--require-static", action="store_true", help="fail when libcst is missing")
    e.add_argument("--no-timing", action="store_true", help="correctness only")
    e.add_argument(
        "--heldout-shapes",
        type=int,
        default=1,
        help="shapes drawn per evaluation from the task's shape space, never printed (default 1; 0: none)",
    )
    e.add_argument(
        "--sandbox",
        choices=["auto", "require", "off"],
        default="auto",
        help="the candidate's ranks in namespaces of their own (PID, network, read-only mounts; default auto: "
        "where the kernel allows unprivileged user namespaces; require: refuse to run without)",
    )
    e.add_argument(
        "--shapes",
        help="JSON file {task_id: [{size param: value}, ...]}: a private shape set used instead of drawing",
    )
    e.add_argument("--baselines", action="append", default=[], help="baselines.jsonl files (repeatable)")
    e.add_argument("--hardware", help="hardware tag of the baselines to compare with (default: all)")
    e.add_argument("--max-speedup", type=float, default=10.0, help="flag speedups above this for review")
    e.add_argument("--results", help="append result records to this JSONL (batch default: DIR/eval-results.jsonl)")
    e.add_argument("--retry-errors", action="store_true", help="batch: re-run samples that errored or timed out")
    e.add_argument("--json", action="store_true", help="print the result record(s) as JSON")
    add_executor_args(e)
    e.set_defaults(func=cmd_eval)

    s = sub.add_parser(
        "score",
        help="pass@k, fast_p@k, speedups and a plot from eval results",
        description="Aggregate eval results: pass@k (unbiased), fast_p@k for p in 1, 1.5, "
        "2, geometric-mean speedup of correct solutions, roofline fraction, by "
        "level and parallelism dimension; writes a PNG of tasks solved vs speedup.",
    )
    s.add_argument("results", nargs="+", help="eval results JSONL file(s)")
    s.add_argument("--k", type=int, action="append", help="k values (default: 1, 5, 10, 100 up to the samples)")
    s.add_argument(
        "--baseline",
        default="reference",
        help="speedup basis: reference (same run, default) or a recorded baseline, e.g. eager",
    )
    s.add_argument("--exclude-flagged", action="store_true", help="count samples flagged for review as wrong")
    s.add_argument(
        "--accept-suspicious",
        action="store_true",
        help="count samples past the roofline bound or the sanity bound (--max-speedup) as passed "
        "and fast (default: neither; the JSON says why per sample)",
    )
    s.add_argument(
        "--count-cpu-timings",
        action="store_true",
        help="count speedups timed on CPU/gloo/shared-GPU/smoke in fast_p and the speedups (default: kept "
        "out; CPU timings are not results)",
    )
    s.add_argument("--plot", help="PNG path (default: <first results file>-solved.png)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_score)


def _backend(args: argparse.Namespace) -> str:
    if args.backend != "auto":
        return args.backend
    import torch

    need = max(args.world_size) if args.world_size else 2  # every world size asked must have its GPUs
    return "nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= need else "gloo"


def _options(args: argparse.Namespace):
    from mgbench.validation.eval.runner import EvalOptions

    backend = _backend(args)
    on_gpu = backends.backend(backend).on_gpu
    return EvalOptions(
        world_size=(args.world_size or [2])[0],
        backend=backend,
        size=args.size or ("full" if on_gpu else "smoke"),
        trials=args.trials,
        timeout_s=args.timeout or (300.0 if on_gpu else 60.0),
        budget_s=args.budget,
        min_iters=args.min_iters,
        seed=args.seed,
        static=not args.no_static,
        require_static=args.require_static,
        timing=not args.no_timing,
        max_speedup=args.max_speedup,
        hardware=args.hardware,
        heldout_shapes=args.heldout_shapes,
        pinned_shapes=_pinned_shapes(args.shapes),
        sandbox=args.sandbox,
    )


def _pinned_shapes(path: str | None) -> dict[str, list[dict]] | None:
    """The --shapes file: {task_id: [shape, ...]}, each shape a {size parameter: value} object."""
    if path is None:
        return None
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: shapes file not found") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e.msg}, line {e.lineno})") from None
    ok = isinstance(data, dict) and all(
        isinstance(v, list) and all(isinstance(s, dict) for s in v) for v in data.values()
    )
    if not ok:
        raise ValueError(f"{path}: expected {{task_id: [{{size parameter: value}}, ...]}}")
    return data


def _exit_code(recs: list[dict]) -> int:
    statuses = {r["status"] for r in recs}
    if statuses & {"error", "timeout"}:
        return EXIT_ERROR
    return EXIT_INCORRECT if "incorrect" in statuses else EXIT_CORRECT


def _sizes_of(task, args: argparse.Namespace, backend: str) -> list[int]:
    """The world sizes `task` is judged at: the requested ones it supports, else the defaults of
    mgbench.validation.eval.worldsizes."""
    from mgbench.validation.eval.worldsizes import judged_world_sizes

    sizes = judged_world_sizes(task.world_sizes, args.world_size, backend)
    return [w for w in sizes if not task.world_sizes or w in task.world_sizes]


def _require_devices(args: argparse.Namespace, backend: str, sizes: Iterable[int]) -> None:
    """Bad input (ValueError, one line) when this machine lacks the GPUs `backend` needs for the largest of
    the world sizes to be judged; not checked where an executor's ranks run (elsewhere, maybe)."""
    largest = max(sizes, default=0)
    if largest and not args.executor:
        backends.require_devices(backend, largest)


def cmd_eval(args: argparse.Namespace) -> int:
    from mgbench.validation.eval.tasks import load_tasks

    opts = _options(args)
    tasks = load_tasks(args.dataset, args.tasks, args.baselines)
    if args.solutions_dir:
        return _eval_batch(args, tasks, opts)
    return _eval_one(args, tasks, opts)


def _eval_one(args: argparse.Namespace, tasks: dict, opts) -> int:
    """One solution file, judged at each of its task's world sizes in turn (the first failure ends it)."""
    from dataclasses import replace

    from mgbench.store import append_jsonl
    from mgbench.validation.eval.batch import task_of
    from mgbench.validation.eval.report import describe
    from mgbench.validation.eval.runner import evaluate

    sol = Path(args.solution)
    if not sol.is_file():
        raise FileNotFoundError(f"{sol}: solution file not found")
    tid = args.task or task_of(sol)
    if tid not in tasks:
        raise ValueError(f"unknown task {tid!r} (pass --task; e.g. {sorted(tasks)[:3]})")
    task = tasks[tid]
    bad = [w for w in args.world_size or [] if task.world_sizes and w not in task.world_sizes]
    if bad:
        raise ValueError(f"task {tid} supports world sizes {task.world_sizes}, not {bad[0]}")
    require_size_class(opts.size, {tid: task.published_sizes()}, f"--size {opts.size}")
    sizes = _sizes_of(task, args, opts.backend)
    _require_devices(args, opts.backend, sizes)
    recs: list[dict] = []
    for ws in sizes:
        rec = evaluate(task, sol, replace(opts, world_size=ws))
        if args.results:
            append_jsonl(args.results, rec)
        recs.append(rec)
        if not args.json:
            print(describe(rec) + "\n")
        if rec["status"] != "correct":
            break
    if args.results:  # other evaluations may append to the same file meanwhile (Inspect, the reward service)
        reassert(args.results, recs)
    if args.json:
        print(json.dumps(recs[0] if len(recs) == 1 else recs, indent=1, sort_keys=True))
    else:
        print(
            f"{tid}: {recs[-1]['status'].upper()} at world size(s) "
            + ", ".join(f"{r['world_size']} {r['status']}" for r in recs)
        )
    return _exit_code(recs)


def _eval_batch(args: argparse.Namespace, tasks: dict, opts) -> int:
    """A folder of samples, each judged at its task's world sizes; the table and the exit code cover
    every sample of the folder (evaluated now or by an earlier run), so a re-run answers the same."""
    from dataclasses import replace

    from mgbench.store import latest_by, read_jsonl
    from mgbench.validation.eval.batch import discover, run_batch
    from mgbench.validation.eval.report import batch_table
    from mgbench.validation.eval.runner import sample_hash
    from mgbench.validation.eval.score import result_key

    results = args.results or str(Path(args.solutions_dir) / "eval-results.jsonl")
    pairs, warnings = discover(args.solutions_dir, tasks)
    if not pairs:  # nothing to judge is bad input, not an empty pass
        why = warnings[0] if warnings else "no *.py sample in it"
        raise ValueError(f"{args.solutions_dir}: no sample names a task of the task set ({why})")
    require_size_class(opts.size, {t.task_id: t.published_sizes() for t, _ in pairs}, f"--size {opts.size}")
    sizes = {t.task_id: _sizes_of(t, args, opts.backend) for t, _ in pairs}
    if not any(sizes.values()):
        first = pairs[0][0]
        raise ValueError(
            f"{args.solutions_dir}: no sample's task offers world size(s) "
            f"{', '.join(map(str, args.world_size or []))} (e.g. {first.task_id}: "
            f"{', '.join(map(str, first.world_sizes))})"
        )
    _require_devices(args, opts.backend, [w for v in sizes.values() for w in v])
    # each sample's hash as the judge reads it, once: a sample that rewrites its own file while it runs
    # cannot point the table at another record
    hashes = {p: sample_hash(p.read_text()) for _, p in pairs}
    # the results file as this run found it (settle's base; a scale-out executor's shards append to it too)
    start = [] if args.executor else list(read_jsonl(results))
    failed: set[str] = set()  # files not correct at a smaller world size: not run at larger ones
    new: list[dict] = []
    for ws in sorted({w for v in sizes.values() for w in v}):
        sub = {tid: tasks[tid] for tid, v in sizes.items() if ws in v}
        o = replace(opts, world_size=ws)
        if args.executor:
            from mgbench.validation.executors.cli import run_eval

            recs, _, _ = run_eval(args, sub, o, Path(results))
        else:
            only = {p.name for t, p in pairs if t.task_id in sub and p.name not in failed}
            recs, _, _ = run_batch(args.solutions_dir, sub, results, o, args.retry_errors, quiet=args.json, only=only)
        new += recs
        done = latest_by(results, result_key)
        for t, p in pairs:
            rec = done.get((t.task_id, hashes[p], ws, o.backend, o.size))
            if rec is not None and rec["status"] != "correct":
                failed.add(p.name)
    if not args.executor:
        settle(results, start, new)
    done = latest_by(results, result_key)
    every, missing = [], []
    for t, p in pairs:
        for ws in sizes[t.task_id]:
            rec = done.get((t.task_id, hashes[p], ws, opts.backend, opts.size))
            if rec is not None:
                every.append(rec)
                if rec["status"] != "correct":
                    break  # not run at larger world sizes
            else:
                missing.append(f"{p.name} at world size {ws}")
                break
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    for m in missing:
        print(f"error: no result for {m} in {results}", file=sys.stderr)
    if args.json:
        print(json.dumps(every, indent=1, sort_keys=True))
    else:
        if every:
            print(batch_table(every))
        print(
            f"{len(every)} result(s) for {len(pairs)} sample(s): {len(new)} evaluated now, "
            f"{len(every) - len(new)} from earlier runs; results: {results}"
        )
    return EXIT_ERROR if missing else _exit_code(every)


def reassert(results: str | Path, recs: list[dict]) -> None:
    """Append again each record of this run that is no longer the latest line of its key in `results`: what
    the judge decided is the last word on it, whatever was appended while the candidate ran. Safe beside
    other writers of the file (appends only)."""
    from mgbench.store import append_jsonl, latest_by
    from mgbench.validation.eval.score import result_key

    latest = latest_by(results, result_key)
    for rec in recs:
        if json.dumps(latest.get(result_key(rec)), sort_keys=True) != json.dumps(rec, sort_keys=True):
            append_jsonl(results, rec)


def settle(results: str | Path, start: list[dict], recs: list[dict]) -> None:
    """Leave `results` as this run found it (`start`) plus the records it judged (`recs`), atomically: a line
    appended while candidates ran (a forged verdict) is dropped. Every candidate's processes are dead by now
    (validation/eval/judge/isolate.py, Containment), so nothing of theirs writes after this."""
    from mgbench.store import rewrite_jsonl

    if recs and Path(results).exists():
        rewrite_jsonl(results, [*start, *recs])


def cmd_score(args: argparse.Namespace) -> int:
    from mgbench.validation.eval.score import format_table, plot, score_report
    from mgbench.validation.eval.verdict import Rules

    rules = Rules(
        accept_suspicious=args.accept_suspicious,
        count_cpu_timings=args.count_cpu_timings,
        exclude_flagged=args.exclude_flagged,
    )
    rep = score_report(args.results, args.k, args.baseline, rules)
    png = Path(args.plot) if args.plot else Path(args.results[0]).with_name(Path(args.results[0]).stem + "-solved.png")
    try:
        plot(rep.groups, png, args.baseline)
        plotted = str(png)
    except ImportError:
        plotted = "skipped (matplotlib is not installed)"
    for w in rep.warnings:
        print(f"WARNING: {w}", file=sys.stderr)
    if args.json:
        print(json.dumps({**rep.to_json(), "plot": plotted}, indent=1, sort_keys=True))
    else:
        print(format_table(rep.summary))
        print(f"speedup basis: {args.baseline}; plot: {plotted}")
    return 0
