"""Eval cost per candidate: wall seconds of `mgbench eval` (mgbench.validation.eval.runner.evaluate) on gloo,
smoke size, world size 2, with the CLI's defaults (5 trials, 1 s timing budget, 50 timed iterations).

Several candidates (correct ones run every phase; a wrong one stops at trial 1) are each evaluated
`--repeats` times, interleaved so that drift of a shared CPU hits every candidate alike; prints the
median seconds per candidate and the median over all correct runs. CPU figures on shared cores are
noisy: compare medians of repeated runs taken on the same machine, never single runs; to compare two
versions, alternate runs of each in the same window (e.g. `git archive <old commit> | tar -x -C OLD`,
then `PYTHONPATH=OLD python OLD/benchmarks/eval_cost.py --repeats 1` and the same for this tree, in turns).

Held-out shapes (one extra correctness trial per shape): `--heldout-shapes 0 --heldout-shapes 1` judges every
candidate under each setting in turn, within each repeat, and prints the median per setting and their ratio.

The candidate's sandbox (judge/sandbox.py): `--sandbox off --sandbox auto` compares starting the candidate's ranks
from the fork server with starting them in their namespaces, the same way (settings are every pair of the two lists).

Usage: python benchmarks/eval_cost.py [--repeats 3] [--budget 1.0] [--trials 5] [--heldout-shapes N ...]
       [--sandbox MODE ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import textwrap
from dataclasses import replace
from pathlib import Path

from mgbench.generator import generate
from mgbench.report import table
from mgbench.validation.eval.runner import EvalOptions, evaluate
from mgbench.validation.eval.tasks import load_tasks_folder

HEAD = "import torch\nimport torch.distributed as dist\n"
ALL_REDUCE = HEAD + textwrap.dedent("""
    def solution(x):
        y = x.clone()
        dist.all_reduce(y)
        return y
""")
ALL_GATHER = HEAD + textwrap.dedent("""
    def solution(x):
        out = torch.empty((dist.get_world_size() * x.shape[0], *x.shape[1:]), dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(out, x.contiguous())
        return out
""")
ZEROS = HEAD + "def solution(x):\n    return torch.zeros_like(x)\n"

# (label, task id, source, expected status)
CANDIDATES = [
    ("reference bw-fp16", "l1-all_reduce-sum-bw-fp16", ALL_REDUCE, "correct"),
    ("reference lat-fp32", "l1-all_reduce-sum-lat-fp32", ALL_REDUCE, "correct"),
    ("all_gather_into_tensor", "l1-all_gather-lat-fp32", ALL_GATHER, "correct"),
    ("zeros (wrong)", "l1-all_reduce-sum-lat-fp32", ZEROS, "incorrect"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--out", help="work folder (default: a temporary one, removed after)")
    ap.add_argument(
        "--heldout-shapes",
        type=int,
        action="append",
        help="held-out shapes per evaluation (repeatable: settings compared in turns; default: eval's)",
    )
    ap.add_argument(
        "--sandbox",
        action="append",
        choices=["auto", "require", "off"],
        help="the candidate's sandbox (repeatable: settings compared in turns; default: eval's)",
    )
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="mgbench-evalcost-"))
    generate(out / "tasks-out", families=["all_reduce", "all_gather"])
    tasks = load_tasks_folder(out / "tasks-out")
    base = EvalOptions(
        world_size=2,
        backend="gloo",
        size="smoke",
        trials=args.trials,
        timeout_s=60.0,
        budget_s=args.budget,
        min_iters=50,
    )
    settings = [
        (h, m) for h in (args.heldout_shapes or [base.heldout_shapes]) for m in (args.sandbox or [base.sandbox])
    ]
    names = {k: f"{k[0]} held-out, sandbox {k[1]}" for k in settings}
    secs: dict[tuple[str, tuple[int, str]], list[float]] = {(c[0], k): [] for c in CANDIDATES for k in settings}
    for rep in range(args.repeats):
        for label, task_id, source, want in CANDIDATES:
            path = out / f"{task_id}.py"
            path.write_text(source)
            for k in settings:
                rec = evaluate(tasks[task_id], path, replace(base, heldout_shapes=k[0], sandbox=k[1]))
                if rec["status"] != want:
                    raise SystemExit(f"{label}: expected {want}, got {rec['status']}: {rec['reason']}")
                secs[label, k].append(rec["seconds"])
                print(
                    f"repeat {rep + 1} {label} ({names[k]}: {rec['sandbox']}): {rec['seconds']:.2f} s "
                    f"({rec['status']}, speedup {rec['speedup']})",
                    flush=True,
                )
    med = {k: statistics.median(v) for k, v in secs.items()}
    rows = [(label, *(f"{med[label, k]:.2f}" for k in settings)) for label, *_ in CANDIDATES]
    correct = {
        k: [s for (label, _, _, want) in CANDIDATES if want == "correct" for s in secs[label, k]] for k in settings
    }
    rows.append(("all correct candidates", *(f"{statistics.median(correct[k]):.2f}" for k in settings)))
    print(table(rows, ["candidate", *(f"median s, {names[k]}" for k in settings)]))
    if len(settings) > 1:
        first, last = statistics.median(correct[settings[0]]), statistics.median(correct[settings[-1]])
        print(f"correct candidates: {last / first:.3f}x the cost with {names[settings[-1]]} vs {names[settings[0]]}")
    if not args.out:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
