"""Rewards per minute of the RL reward service (mgbench.rl.service) on this machine's CPUs.

Scores one batch of scripted completions, the way a trainer would hand them over: the task's reference as
the candidate (correct), the reference with its output doubled (wrong) and prose without code, spread over
the tasks of the all_reduce family. Every completion with code is one `mgbench eval` child (static checks,
fresh gloo rank processes, correctness trials, timing), at most --max-evals at a time. Prints a table per
kind of completion and the batch's rewards per minute and seconds per reward.

This is a COST figure (what a reward costs in wall time here, start-up of the evaluation processes
included), not a timing result: on CPU/gloo at smoke size the timings inside each evaluation are not
results, and the reward is correctness only (0.5 for a correct answer, mgbench/rl/reward.py).

  PYTHONPATH=. python3 benchmarks/reward_rate.py [--n 24] [--max-evals N] [--trials 2] [--no-timing]
      [--tasks OUT | --dataset DATASET] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WRONG_TAIL = "\n\n_reference_solution = solution\n\n\ndef solution(*args):\n    return _reference_solution(*args) * 2\n"
PROSE = "I would fuse the reduction with the compute and overlap the transfers; no code yet."
KINDS = ("reference", "wrong", "no code")


def completion(kind: str, reference: str) -> str:
    if kind == "no code":
        return PROSE
    code = reference if kind == "reference" else reference + WRONG_TAIL
    return f"Here is the solution.\n\n```python\n{code}```\n"


def task_sources(args: argparse.Namespace, work: Path) -> tuple[str, dict[str, str]]:
    """(the --tasks/--dataset spec, {task id: reference source}) of the tasks a batch spreads over."""
    if args.dataset:
        from mgbench.validation.eval.tasks import load_dataset_tasks

        tasks = load_dataset_tasks(args.dataset)
        return args.dataset, {t: i.source for t, i in tasks.items() if args.world_size in (i.world_sizes or [2])}
    out = Path(args.tasks) if args.tasks else work / "out"
    if not args.tasks:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        gen = [sys.executable, "-m", "mgbench.cli", "generate", "--out", str(out), "--family", "all_reduce"]
        subprocess.run(gen, env=env, check=True, capture_output=True, text=True)
    from mgbench.validation.eval.tasks import load_tasks_folder

    tasks = load_tasks_folder(out)
    return str(out), {t: i.source for t, i in tasks.items() if args.world_size in (i.world_sizes or [2])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=24, help="completions in the batch (default 24: 8 of each kind)")
    ap.add_argument("--tasks", help="generator OUT folder (default: the all_reduce family, generated here)")
    ap.add_argument("--dataset", help="a dataset folder or Hub id instead of --tasks")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--max-evals", type=int, help="evaluations at once (default: cores // (world size + 1))")
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--budget", type=float, default=0.3, help="timing budget per timed function, seconds")
    ap.add_argument("--min-iters", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per evaluation phase")
    ap.add_argument("--no-timing", action="store_true", help="correctness only (the reward on CPU is that anyway)")
    ap.add_argument("--json", help="also write the figures to this JSON file")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mgb-reward-rate-"))
    try:
        return run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, work: Path) -> int:
    from mgbench.rl.service import RewardService, RewardSettings, run_sync

    spec, sources = task_sources(args, work)
    ids = sorted(sources)
    batch = [(KINDS[i % len(KINDS)], ids[i % len(ids)]) for i in range(args.n)]
    settings = RewardSettings(
        dataset=spec,
        world_size=args.world_size,
        backend="gloo",
        trials=args.trials,
        timing=not args.no_timing,
        timing_budget=args.budget,
        min_iters=args.min_iters,
        timeout=args.timeout,
        max_evals=args.max_evals,
        dedupe=False,  # every completion costs its own evaluation, as distinct samples of a trainer would
        work_dir=str(work),
    )
    service = RewardService(settings)
    completions = [completion(kind, sources[tid]) for kind, tid in batch]
    print(
        f"{args.n} completions over {len(ids)} tasks, world size {args.world_size}, gloo smoke, "
        f"{settings.concurrency()} evaluation(s) at once on {os.cpu_count()} CPU(s); load average before: "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        flush=True,
    )
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    scored = run_sync(lambda: service.evaluate_batch(completions, [tid for _, tid in batch]))
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)

    by: dict[str, list] = defaultdict(list)
    for (kind, _), s in zip(batch, scored):
        by[kind].append(s)
    print(f"\n{'completion':12} {'n':>3} {'reward':>7} {'kind':14} {'s per eval':>10}")
    rows = []
    for kind in KINDS:
        ss = by.get(kind, [])
        if not ss:
            continue
        reward = sum(s.reward.value for s in ss) / len(ss)
        kinds = ",".join(sorted({s.reward.kind for s in ss}))
        secs = sum(s.seconds for s in ss) / len(ss)
        rows.append({"completion": kind, "n": len(ss), "reward": reward, "kind": kinds, "seconds_per_eval": secs})
        print(f"{kind:12} {len(ss):>3} {reward:>7.3f} {kinds:14} {secs:>10.2f}")
    per_min = 60.0 * len(scored) / wall
    print(
        f"\nbatch of {len(scored)}: {wall:.1f} s wall, {cpu:.0f} CPU-s in the evaluation processes\n"
        f"rewards per minute: {per_min:.1f}    seconds per reward: {wall / len(scored):.2f}\n"
        f"(a cost figure on {platform.processor() or platform.machine()} with {os.cpu_count()} CPU(s), load average "
        f"after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; not a timing result: on CPU the reward is "
        "correctness only)"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "completions": len(scored),
                    "wall_s": wall,
                    "children_cpu_s": cpu,
                    "rewards_per_minute": per_min,
                    "seconds_per_reward": wall / len(scored),
                    "concurrency": settings.concurrency(),
                    "cpus": os.cpu_count(),
                    "rows": rows,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
