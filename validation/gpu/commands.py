"""`mgbench validate --timing ...`: the options and entry of the GPU pass (mgbench.validation.gpu.run)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_gpu_args(v: argparse.ArgumentParser) -> None:
    g = v.add_argument_group("GPU pass (--timing): full-size checks, baselines, noise floor, roofline")
    g.add_argument(
        "--timing",
        action="store_true",
        help="also time the reference (eager) and the null candidate, trace the roofline, and "
        "write results/<tag>/{hardware.json,validation-BACKEND.jsonl,baselines.jsonl}",
    )
    g.add_argument("--hardware-tag", default="h200x2", help="hardware tag of the results (default: %(default)s)")
    g.add_argument("--results-dir", help="results folder (default: results/TAG)")
    g.add_argument(
        "--baselines", default="eager,null", help="comma list from eager,null,compile,vendor (default: %(default)s)"
    )
    g.add_argument("--budget", type=float, default=0.3, help="seconds per timing (default: %(default)s)")
    g.add_argument("--shard", default="0/1", help="I/N: every N-th selected task from the I-th (default: %(default)s)")
    g.add_argument("--max-seconds", type=float, help="start no new task after this many seconds")
    g.add_argument("--retry-failed", action="store_true", help="re-run failed tasks and baselines")
    g.add_argument("--remeasure", action="store_true", help="measure the ceilings again")
    g.add_argument(
        "--keep-old-timings", action="store_true", help="keep results of an older timing method instead of redoing them"
    )


def cmd_gpu(args: argparse.Namespace) -> int:
    from mgbench.validation.gpu.run import GpuRun, GpuRunConfig

    i, n = (int(x) for x in args.shard.split("/"))
    if not 0 <= i < n:
        raise ValueError(f"--shard {args.shard}: want I/N with 0 <= I < N")
    cfg = GpuRunConfig(
        out=Path(args.out),
        results_dir=Path(args.results_dir or f"results/{args.hardware_tag}"),
        hardware_tag=args.hardware_tag,
        world_sizes=args.world_sizes or [2],
        backend=args.backend,
        size=args.size,
        seed=args.seed,
        budget_s=args.budget,
        check_timeout_s=args.timeout,
        baselines=tuple(b for b in args.baselines.split(",") if b),
        task_ids=args.task,
        levels=args.level,
        families=args.family,
        shard=(i, n),
        dtypes=args.dtype,  # any spelling (mgbench.taskfilter)
        max_seconds=args.max_seconds,
        retry_failed=args.retry_failed,
        remeasure=args.remeasure,
        keep_old_timings=args.keep_old_timings,
    )
    stats = GpuRun(cfg).run()
    print("gpu pass: " + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in stats.items()))
    print(f"results: {cfg.results_dir}")
    return 0
