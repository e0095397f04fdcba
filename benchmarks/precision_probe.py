"""Where a reference's error against its float64 oracle comes from on CUDA (issue #45, "every failure explained").

For each task and world size, runs the reference at full size with ranks sharing the GPU, twice: once
with PyTorch's CUDA math defaults (reduced-precision reductions in half-precision GEMMs allowed, TF32 as
configured) and once strict (no reduced-precision reductions, no TF32 in matmuls or cuDNN). Each run is
compared with the same float64 oracle; per output leaf it prints the calibrated error (`excess`, the
figure the tolerance is set from, in units of compare.error_scale), and, in units of rms(expected), the
rms of the error, the largest error and the magnitude of the expected value where the error is largest.
A task whose error falls to a small fraction under the strict settings owes it to cuBLAS/cuDNN's
reduced-precision paths, not to its own algorithm.

Correctness diagnosis only (host-staged gloo); never a timing. Runs on a GPU machine from the tree:

  PYTHONPATH=. python3 benchmarks/precision_probe.py --out .gpuout --world-size 4 \\
      --only 'l3-cp_ring_dp_attention-bf16' --json OUT.json
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mgbench.report import table  # noqa: E402
from mgbench.store import load_manifest  # noqa: E402
from mgbench.validation.jobs import TaskJob  # noqa: E402
from mgbench.validation.worker import register  # noqa: E402

# name -> (attribute owner, attribute): the CUDA math switches the strict run turns off
SWITCHES = {
    "matmul_tf32": ("torch.backends.cuda.matmul", "allow_tf32"),
    "bf16_reduced_reduction": ("torch.backends.cuda.matmul", "allow_bf16_reduced_precision_reduction"),
    "fp16_reduced_reduction": ("torch.backends.cuda.matmul", "allow_fp16_reduced_precision_reduction"),
    "cudnn_tf32": ("torch.backends.cudnn", "allow_tf32"),
}


def _owner(dotted: str) -> Any:
    obj: Any = torch
    for part in dotted.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True, kw_only=True)
class PrecisionProbeJob(TaskJob):
    """Run the reference under the default or the strict CUDA math switches; compare with the oracle."""

    kind: ClassVar[str] = "precision_probe"
    size: str
    strict: bool
    shape: dict[str, Any] | None = None  # registered as the module's SIZES[size] first (a CPU stand-in size)


def _leaf_errors(out: Any, expected: Any) -> list[dict[str, Any]]:
    from mgbench.validation.compare import RTOL, dtype_name, excess, leaves

    rows = []
    for (path, a), (_, e) in zip(leaves(out), leaves(expected)):
        if not (isinstance(a, torch.Tensor) and a.is_floating_point()):
            continue
        a64, e64 = a.detach().double(), e.detach().to(a.device).double()
        rms = float(e64.pow(2).mean().sqrt())
        err = (a64 - e64).abs()
        worst = int(err.flatten().argmax())
        rows.append(
            {
                "leaf": path,
                "dtype": dtype_name(a),
                "excess": excess(a, e, RTOL.get(dtype_name(a), 0.0)),
                "err_rms": float(err.pow(2).mean().sqrt()) / rms if rms else float("nan"),
                "err_max": float(err.flatten()[worst]) / rms if rms else float("nan"),
                "expected_at_worst": float(e64.flatten()[worst].abs()) / rms if rms else float("nan"),
                "expected_max": float(e64.abs().max()) / rms if rms else float("nan"),
            }
        )
    return rows


def _probe_job(job: PrecisionProbeJob, ctx: Any) -> dict[str, Any]:
    from mgbench.validation.checks import clone_tree, expected_output

    saved = {name: getattr(_owner(o), a) for name, (o, a) in SWITCHES.items()}
    try:
        for name, (o, a) in SWITCHES.items():
            setattr(_owner(o), a, False if job.strict else saved[name])
        mod = ctx.module(job.path, job.content_hash)
        if job.shape is not None:
            mod.SIZES[job.size] = dict(job.shape)
        inputs = mod.make_inputs(ctx.rank, ctx.world_size, seed=job.seed, device=ctx.device, size=job.size)
        out = clone_tree(mod.solution(*inputs))
        expected = expected_output(mod, inputs, ctx.rank, ctx.world_size, ctx.device, job.size, job.seed, True)
        return {"rank": ctx.rank, "switches": saved, "leaves": _leaf_errors(out, expected)}
    finally:
        for name, (o, a) in SWITCHES.items():
            setattr(_owner(o), a, saved[name])
        if ctx.device.type == "cuda":
            torch.cuda.empty_cache()


register(PrecisionProbeJob, _probe_job)


def main() -> None:
    from mgbench.validation.pool import RankPool

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="generated tasks (manifest.jsonl)")
    p.add_argument("--only", action="append", required=True, help="glob of task ids (repeatable)")
    p.add_argument("--world-size", type=int, action="append", dest="world_sizes")
    p.add_argument("--backend", default="shared-gpu", help="default: %(default)s (gloo: a CPU dry run)")
    p.add_argument("--size", default="full")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=240.0)
    p.add_argument("--json", help="write every rank's rows here")
    p.add_argument("--shape", type=json.loads, help="size parameters to use as --size (JSON, e.g. '{\"s\": 4096}')")
    args = p.parse_args()
    tasks = [t for t in load_manifest(Path(args.out)) if any(fnmatch.fnmatchcase(t["task_id"], g) for g in args.only)]
    rows, records = [], []
    for ws in args.world_sizes or [4]:
        with RankPool(ws, args.backend, extra_handlers=["precision_probe"]) as pool:
            for t in tasks:
                path = str(Path(args.out) / t["module"])
                for strict in (False, True):
                    shape = {**t["sizes"][args.size], **args.shape} if args.shape else None
                    job = PrecisionProbeJob(
                        path=path,
                        content_hash=t["content_hash"],
                        seed=args.seed,
                        size=args.size,
                        strict=strict,
                        shape=shape,
                    )
                    oc = pool.run(job, timeout_s=args.timeout)
                    if oc.status != "ok":
                        print(f"{t['task_id']} ws{ws} strict={strict}: {oc.status} {oc.reason}", flush=True)
                        pool.restart()
                        continue
                    results = [r["result"] for r in oc.results]
                    records.append({"task_id": t["task_id"], "world_size": ws, "strict": strict, "ranks": results})
                    worst: dict[str, dict[str, Any]] = {}
                    for res in results:
                        for leaf in res["leaves"]:
                            if leaf["leaf"] not in worst or leaf["excess"] > worst[leaf["leaf"]]["excess"]:
                                worst[leaf["leaf"]] = leaf
                    for leaf in worst.values():
                        rows.append(
                            [t["task_id"], ws, "strict" if strict else "default", leaf["leaf"], leaf["dtype"]]
                            + [f"{leaf[k]:.3g}" for k in ("excess", "err_rms", "err_max", "expected_at_worst")]
                        )
                    print(f"{t['task_id']} ws{ws} {'strict' if strict else 'default'} done", flush=True)
    print(table(rows, ["task", "ws", "math", "leaf", "dtype", "excess", "err rms", "err max", "|e| at max"]))
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
