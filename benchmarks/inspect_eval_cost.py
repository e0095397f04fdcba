"""Eval seconds per sample of the Inspect task on gloo at smoke size (the cost the scorer adds).

Runs `mgbench/mgbench` with the offline provider `mgbench_scripted/reference` (each task answered
with its reference, so every sample goes through all phases: static checks, trials, timing, final
trial) and reports, per sample, the seconds `mgbench eval` itself records and the wall seconds of
its child process (interpreter start-up and dataset load included), then the whole Inspect run.
CPU seconds are the cost of scoring here, not results about kernels.

Usage: python benchmarks/inspect_eval_cost.py [--dataset DIR] [--tasks 4] [--max-evals 1]
       [--trials 5] [--no-timing] [--protocol zero_shot|agent]
Without --dataset it builds the bf16 all_reduce tasks (`mgbench build`) into a temporary folder.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mgbench.report import table  # noqa: E402


def build(out: Path) -> Path:
    cmd = [
        sys.executable,
        "-m",
        "mgbench.cli",
        "build",
        "--out",
        str(out),
        "--family",
        "all_reduce",
        "--dtype",
        "bf16",
    ]
    subprocess.run(cmd, check=True, cwd=str(REPO), capture_output=True)
    return out / "dataset"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", help="dataset folder (default: build a small one)")
    ap.add_argument("--tasks", type=int, default=4, help="samples (tasks) to evaluate")
    ap.add_argument("--max-evals", type=int, default=1, help="concurrent evaluations")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--protocol", default="zero_shot", choices=["zero_shot", "agent"])
    args = ap.parse_args()
    from inspect_ai import eval as inspect_eval

    import mgbench.inspect_eval.scripted  # noqa: F401  (registers the offline provider)
    from mgbench.inspect_eval.task import mgbench as mgbench_task

    work = Path(tempfile.mkdtemp(prefix="mgbench-inspect-bench-"))
    dataset = args.dataset or str(build(work / "build"))
    task = mgbench_task(
        dataset=dataset,
        trials=args.trials,
        timing=not args.no_timing,
        max_evals=args.max_evals,
        eval_backend="gloo",
        protocol=args.protocol,
        out=str(work / "runs"),
    )
    t0 = time.perf_counter()
    log = inspect_eval(
        task, model="mgbench_scripted/reference", limit=args.tasks, log_dir=str(work / "logs"), display="none"
    )[0]
    total = time.perf_counter() - t0
    if log.status != "success":
        raise SystemExit(f"inspect run failed: {log.error}")
    rows, rec_s, wall_s = [], [], []
    for s in log.samples:
        m = s.scores["mgbench_eval"].metadata
        rec_s.append(m["seconds"])
        wall_s.append(m["eval_wall_s"])
        rows.append((s.id, m["status"], m["seconds"], m["eval_wall_s"]))
    print(table(rows, ["task", "status", "mgbench eval s", "child wall s"]))
    print(
        f"\nsamples {len(rows)}, world size 2, gloo, smoke, trials {args.trials}, "
        f"timing {not args.no_timing}, "
        f"protocol {args.protocol}, {args.max_evals} concurrent"
    )
    print(f"mgbench eval seconds per sample: mean {statistics.mean(rec_s):.1f}, median {statistics.median(rec_s):.1f}")
    print(
        f"child wall seconds per sample:   mean {statistics.mean(wall_s):.1f}, median {statistics.median(wall_s):.1f}"
    )
    print(f"whole Inspect run: {total:.1f} s ({total / len(rows):.1f} s per sample); files in {work}")


if __name__ == "__main__":
    main()
