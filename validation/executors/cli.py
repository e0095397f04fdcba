"""`mgbench validate --executor ...` and `mgbench eval --solutions-dir ... --executor ...`: the executor
the options describe (mgbench.validation.executors.options) and the two command entries."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from mgbench.validation.executors.dispatch import DispatchReport, dispatch, plan_eval, plan_validate
from mgbench.validation.executors.shard import done_in, merge_parts, parts_dir


def _value(v: str) -> Any:
    low = v.lower()
    if low in ("true", "false"):
        return low == "true"
    return int(v) if v.isdigit() else v


def make_executor(args: argparse.Namespace, results: Path) -> Any:
    quiet = bool(getattr(args, "json", False))
    if args.executor == "local":
        from mgbench.validation.executors.local import LocalExecutor

        return LocalExecutor(ranks=args.local_ranks, quiet=quiet)
    if args.executor == "slurm":
        from mgbench.validation.executors.slurm import SlurmExecutor, SlurmOptions

        extra = dict(kv.split("=", 1) for kv in args.slurm_extra)
        return SlurmExecutor(
            SlurmOptions(
                partition=args.slurm_partition,
                time_min=args.slurm_time,
                gpus_per_node=args.slurm_gpus_per_node,
                array_parallelism=args.slurm_nodes,
                cpus_per_task=args.slurm_cpus_per_task,
                mem_gb=args.slurm_mem_gb,
                account=args.slurm_account,
                qos=args.slurm_qos,
                constraint=args.slurm_constraint,
                setup=args.slurm_setup,
                extra={k: _value(v) for k, v in extra.items()},
                folder=args.slurm_folder or str(parts_dir(results) / "submitit"),
                cluster="local" if args.slurm_local else "slurm",
                wait=not args.slurm_no_wait,
            ),
            quiet=quiet,
        )
    from mgbench.validation.executors.ray_executor import RayExecutor, RayOptions

    return RayExecutor(
        RayOptions(address=args.ray_address, ranks_per_node=args.ray_gpus_per_node, max_retries=args.ray_max_retries),
        quiet=quiet,
    )


def _report(rep: DispatchReport, results: Path) -> None:
    for o in rep.failed():
        print(f"shard {o.describe()}", file=sys.stderr)
    print(rep.summary())
    print(f"results: {results}")


def run_validate(args: argparse.Namespace, results: Path) -> int:
    """`mgbench validate --executor ...`: exit 1 when a planned task failed or a shard did not finish."""
    from mgbench.validation.run import ValidationResult, summary_table

    ex = make_executor(args, results)
    plan = plan_validate(
        args.out,
        results,
        args.world_sizes or [2],
        args.backend,
        args.size,
        args.shards,
        ex.concurrency,
        args.task,
        args.hardware_kind,
        {"timeout_s": args.timeout, "seed": args.seed},
    )
    rep = dispatch(ex, plan, results, retry_failed=args.retry_failed)
    done = done_in(results, "validate")
    recs = [done[tuple(k)] for s in plan for k in s.keys if tuple(k) in done]
    if recs:
        names = {f.name for f in fields(ValidationResult)}
        print(summary_table([ValidationResult(**{k: v for k, v in r.items() if k in names}) for r in recs]))
    for r in recs:
        if r["status"] != "passed":
            print(f"FAILED {r['task_id']} (ws={r['world_size']}): {r['reason']}")
    _report(rep, results)
    return 1 if rep.failed() or any(r["status"] != "passed" for r in recs) else 0


def run_eval(
    args: argparse.Namespace, tasks: dict[str, Any], opts: Any, results: Path
) -> tuple[list[dict[str, Any]], int, list[str]]:
    """`mgbench eval --solutions-dir ... --executor ...`, returning what run_batch does: (records of the
    samples evaluated in this run, samples skipped, warnings); RuntimeError when a shard did not finish."""
    ex = make_executor(args, results)
    plan, warnings = plan_eval(
        args.solutions_dir, tasks, results, opts, args.shards, ex.concurrency, args.retry_errors, args.hardware_kind
    )
    merge_parts(results, "eval")
    before = done_in(results, "eval")
    rep = dispatch(ex, plan, results, retry_failed=args.retry_errors, quiet=args.json)
    after = done_in(results, "eval")
    keys = [tuple(k) for s in plan for k in s.keys]
    recs = [after[k] for k in keys if k in after and after[k] != before.get(k)]
    if not args.json:
        _report(rep, results)
    if rep.failed():
        raise RuntimeError(f"{len(rep.failed())} shard(s) did not finish: {rep.failed()[0].describe()}")
    return recs, len(keys) - len(recs), warnings
