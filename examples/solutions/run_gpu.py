"""Evaluate the example solutions (and GPU-only adversarial candidates) with `mgbench eval` on NCCL.

Usage (a machine with >= 2 GPUs; from the repository root):
    PYTHONPATH=. python3 examples/solutions/run_gpu.py --out /tmp/mgbench-gpu-eval
Generates the tasks the examples solve, evaluates each file at size "full" on world size 2, appends
the records to OUT/results.jsonl, prints one block per evaluation, a summary table and the score.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEAD = "import torch\nimport torch.distributed as dist\n"
REFERENCE_AR = HEAD + "def solution(x):\n    y = x.clone()\n    dist.all_reduce(y)\n    return y\n"
GPU_ADVERSARIAL = {
    # the all-reduce runs on a side stream that the current stream never waits for
    "side_stream_unsynced": HEAD
    + textwrap.dedent("""
        _s = {}
        def solution(x):
            s = _s.setdefault("s", torch.cuda.Stream())
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                torch.cuda._sleep(20_000_000)          # ~10 ms of device time before the real work
                y = x.clone()
                dist.all_reduce(y)
            return y
    """),
    # correct on the current stream, but leaves device work on a side stream that events do not see
    "side_stream_busy": HEAD
    + textwrap.dedent("""
        _s = {}
        def solution(x):
            s = _s.setdefault("s", torch.cuda.Stream())
            y = x.clone()
            dist.all_reduce(y)
            with torch.cuda.stream(s):
                torch.cuda._sleep(4_000_000)           # ~2 ms the timed events never see
            return y
    """),
    "cached_output": HEAD
    + textwrap.dedent("""
        _c = []
        def solution(x):
            if not _c:
                y = x.clone()
                dist.all_reduce(y)
                _c.append(y)
            return _c[0].clone()
    """),
}
CASES = [  # (label, task id, file name or adversarial key, trials, timing)
    (
        "example (a) one-shot push all-reduce kernel over symm-mem",
        "l1-all_reduce-sum-lat-bf16",
        "l1-all_reduce-sum-lat-bf16.py",
        5,
        True,
    ),
    (
        "example (c) load_inline peer-pointer all-reduce",
        "l1-all_reduce-sum-lat-fp32",
        "l1-all_reduce-sum-lat-fp32.py",
        5,
        True,
    ),
    (
        "example (a') torch symm-mem one_shot_all_reduce op",
        "l1-all_reduce-sum-lat-bf16",
        "l1-all_reduce-sum-lat-bf16@torch_one_shot.py",
        5,
        True,
    ),
    ("example (b) all-gather + GEMM overlapped", "l2-ag_gemm-bf16", "l2-ag_gemm-bf16.py", 5, True),
    ("reference as candidate", "l1-all_reduce-sum-lat-bf16", "REFERENCE", 3, True),
    ("adversarial: side stream, unsynced", "l1-all_reduce-sum-lat-bf16", "side_stream_unsynced", 3, True),
    ("adversarial: side-stream work hidden from timing", "l1-all_reduce-sum-lat-bf16", "side_stream_busy", 3, True),
    ("adversarial: cached output", "l1-all_reduce-sum-lat-bf16", "cached_output", 3, True),
]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/mgbench-gpu-eval")
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--only", action="append", help="run only cases whose label contains this")
    ap.add_argument("--skip", action="append", default=[], help="skip cases whose label contains this")
    ap.add_argument("--min-iters", type=int, default=50)
    ap.add_argument("--backend", default="nccl", help="gloo + --size smoke for a dry run on CPU")
    ap.add_argument("--size", default="full")
    ap.add_argument("--resume", help="JSONL of earlier records: skip cases it holds for the same task version")
    args = ap.parse_args(argv)
    from mgbench.generator.generate import generate
    from mgbench.store import append_jsonl, read_jsonl
    from mgbench.validation.eval.report import batch_table, describe
    from mgbench.validation.eval.runner import EvalOptions, evaluate
    from mgbench.validation.eval.score import format_table, plot, score
    from mgbench.validation.eval.tasks import load_tasks_folder

    out = Path(args.out)
    generate(out / "gen", families=["all_reduce", "ag_gemm"])
    baselines = sorted(Path("results").glob("*/baselines.jsonl"))
    tasks = load_tasks_folder(out / "gen", baselines)
    cands = out / "candidates"
    cands.mkdir(parents=True, exist_ok=True)
    results, recs = out / "results.jsonl", []
    done = (
        {(r.get("label"), r.get("content_hash")) for r in read_jsonl(Path(args.resume))}
        if args.resume and Path(args.resume).exists()
        else set()
    )
    for label, tid, what, trials, timing in CASES:
        if (args.only and not any(o in label for o in args.only)) or any(o in label for o in args.skip):
            continue
        if (label, tasks[tid].content_hash) in done:
            print(f"## {label}: done in {args.resume}", flush=True)
            continue
        if what.endswith(".py"):
            path = HERE / what
        else:
            path = cands / f"{tid}@{what.lower()}.py"
            path.write_text(REFERENCE_AR if what == "REFERENCE" else GPU_ADVERSARIAL[what])
        opts = EvalOptions(
            world_size=2,
            backend=args.backend,
            size=args.size,
            trials=trials,
            timeout_s=args.timeout,
            budget_s=args.budget,
            timing=timing,
            min_iters=args.min_iters,
        )
        rec = evaluate(tasks[tid], path, opts)
        rec["label"] = label
        append_jsonl(results, rec)
        recs.append(rec)
        print(f"\n## {label}\n{describe(rec)}", flush=True)
    if not recs:
        print("nothing left to run")
        return 0
    print("\n" + batch_table(recs))
    summary, groups = score([str(results)])
    plot(groups, out / "solved.png", "reference")
    print("\n" + format_table(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
