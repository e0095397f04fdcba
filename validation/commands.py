"""CLI subcommand of the validation stage: `validate`."""

from __future__ import annotations

import argparse
from pathlib import Path

from mgbench import backends
from mgbench.validation.executors.options import add_executor_args
from mgbench.validation.gpu.commands import add_gpu_args, cmd_gpu


def register(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser(
        "validate",
        help="check every task on a rank pool (gloo on CPU, NCCL on GPU)",
        description="Run the correctness checks of every task in a manifest on N "
        "rank processes; results are appended to a JSONL file and a "
        "re-run skips tasks whose content hash already passed.",
    )
    v.add_argument("--out", default="mgbench-out", help="folder holding manifest.jsonl (default: %(default)s)")
    v.add_argument("--results", help="results JSONL (default: OUT/results/validation-BACKEND.jsonl)")
    v.add_argument(
        "--world-size", type=int, action="append", dest="world_sizes", help="world sizes (repeatable; default: 2)"
    )
    v.add_argument("--backend", default="gloo", choices=backends.NAMES, help=backends.help_text())
    v.add_argument("--size", default="smoke", help="size class (default: %(default)s)")
    v.add_argument("--timeout", type=float, default=60.0, help="per-task timeout in seconds")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--task", action="append", help="only these task ids (repeatable)")
    v.add_argument("--level", type=int, action="append", help="only tasks of these levels (repeatable)")
    v.add_argument("--family", action="append", help="only tasks of these families (repeatable)")
    v.add_argument("--dtype", action="append", help="only these dtypes, e.g. bf16 or bfloat16 (repeatable)")
    add_gpu_args(v)
    add_executor_args(v)
    v.set_defaults(func=cmd_validate)


def select_tasks(args: argparse.Namespace) -> list[str] | None:
    """Task ids of OUT's manifest matching --task/--level/--family/--dtype (None: no filter given)."""
    if not (args.level or args.family or args.dtype):
        return args.task
    from mgbench.store import load_manifest
    from mgbench.taskfilter import TaskFilter

    only = TaskFilter.of(args.task, args.level, args.family, args.dtype)
    ids = [t["task_id"] for t in only.select(load_manifest(args.out))]
    if not ids:
        raise ValueError(
            f"no task of {Path(args.out) / 'manifest.jsonl'} matches the --task/--level/--family/--dtype filters"
        )
    return ids


def cmd_validate(args: argparse.Namespace) -> int:
    if args.timing and args.executor:
        raise ValueError("--executor does not shard the --timing pass (it wants whole nodes): use --shard I/N")
    if args.timing:
        chosen = backends.backend(args.backend)
        if chosen.on_gpu and not chosen.timings_are_results:
            raise ValueError(f"--timing needs one GPU per rank: {args.backend} times are host-staged, never results")
        return cmd_gpu(args)
    if args.shard != "0/1" or args.max_seconds is not None:
        raise ValueError("--shard and --max-seconds apply to the --timing pass; shard validation with --executor")
    args.task = select_tasks(args)
    if not args.executor:  # an executor's ranks may run elsewhere
        backends.require_devices(args.backend, max(args.world_sizes or [2]))
    from mgbench.validation.run import summary_table, validate

    results = Path(args.results) if args.results else Path(args.out) / "results" / f"validation-{args.backend}.jsonl"
    if args.executor:
        from mgbench.validation.executors.cli import run_validate

        return run_validate(args, results)
    res = validate(
        args.out,
        results,
        world_sizes=args.world_sizes or [2],
        backend=args.backend,
        size=args.size,
        timeout_s=args.timeout,
        seed=args.seed,
        task_ids=args.task,
    )
    if res:
        print(summary_table(res))
    failed = [r for r in res if r.status != "passed"]
    for r in failed:
        print(f"FAILED {r.task_id} (ws={r.world_size}): {r.reason}")
    print(f"results: {results}")
    return 1 if failed else 0
