"""GPU validation throughput: GPU-seconds per task and peak memory per rank, as a table.

Runs the GPU pass (`mgbench validate --timing`) over a selection of tasks into a results folder,
then prints the per-task table and the acceptance figures of that folder. With --planted, a hung
task and a crashing task are added to a copy of the manifest, to show they are aborted within
their timeout while the run goes on. With --summary-only, only prints the tables of a folder.

  PYTHONPATH=. python3 benchmarks/gpu_validate.py --out mgbench-out --results-dir /tmp/r --level 1
  PYTHONPATH=. python3 benchmarks/gpu_validate.py --summary-only results/h200x2
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mgbench.store import MANIFEST_NAME, load_manifest, manifest_text  # noqa: E402  (after the path)

PLANTED_HEAD = """import os
import torch
import torch.distributed as dist
SIZES = {"smoke": {"n": 1024}, "full": {"n": 1 << 20}}
def make_inputs(rank, world_size, *, seed, device, size="full"):
    g = torch.Generator().manual_seed(seed * 100 + rank)
    return (torch.randn(SIZES[size]["n"], generator=g).to(device),)
def oracle(inputs_per_rank, world_size):
    s = sum(i[0].double() for i in inputs_per_rank)
    return [s.float() for _ in range(world_size)]
"""
PLANTED = {
    "planted-hang": "def solution(x):\n    y = x.clone()\n    if dist.get_rank() == 0:\n"
    "        dist.recv(y, src=1)\n    dist.all_reduce(y)\n    return y\n",
    "planted-crash": "def solution(x):\n    if dist.get_rank() == 1:\n        os._exit(3)\n"
    "    y = x.clone()\n    dist.all_reduce(y)\n    return y\n",
    "planted-good": "def solution(x):\n    y = x.clone()\n    dist.all_reduce(y)\n    return y\n",
}


def with_planted(out: Path, dest: Path) -> Path:
    """A copy of OUT's manifest (modules linked) plus the planted tasks."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "tasks").mkdir(exist_ok=True)
    recs = load_manifest(out) if (out / MANIFEST_NAME).exists() else []
    for rec in recs:
        shutil.copy(rec["_path"], dest / rec["module"])
    for tid, body in PLANTED.items():
        src = PLANTED_HEAD + body
        (dest / "tasks" / f"{tid}.py").write_text(src)
        recs.append(
            {
                "task_id": tid,
                "module": f"tasks/{tid}.py",
                "level": 1,
                "family": tid,
                "dtype": "float32",
                "world_sizes": [2, 4, 8],
                "content_hash": hashlib.sha256(src.encode()).hexdigest(),
            }
        )
    (dest / MANIFEST_NAME).write_text(manifest_text(recs))  # in this order: the planted tasks last
    return dest


def main(argv: list[str] | None = None) -> int:
    from mgbench.validation.gpu.report import acceptance, format_acceptance, task_table
    from mgbench.validation.gpu.run import GpuRun, GpuRunConfig

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="mgbench-out")
    ap.add_argument("--results-dir", default="/tmp/mgbench-gpu-bench")
    ap.add_argument("--hardware-tag", default="h200x2")
    ap.add_argument("--backend", default="nccl")
    ap.add_argument("--size", default="full")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--task", action="append")
    ap.add_argument("--level", type=int, action="append")
    ap.add_argument("--baselines", default="eager,null")
    ap.add_argument("--budget", type=float, default=0.3)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--planted", action="store_true", help="add a hung and a crashing task")
    ap.add_argument("--summary-only", metavar="RESULTS_DIR")
    a = ap.parse_args(argv)
    if a.summary_only:
        manifest = load_manifest(a.out) if (Path(a.out) / "manifest.jsonl").exists() else None
        hashes = {t["task_id"]: t["content_hash"] for t in manifest} if manifest else None
        print(task_table(a.summary_only, hashes=hashes))
        print(format_acceptance(acceptance(a.summary_only, manifest, world_size=a.world_size)))
        return 0
    out = Path(a.out)
    if a.planted:
        out = with_planted(out, Path(a.results_dir) / "planted-out")
        a.task = (a.task or []) + list(PLANTED) if a.task else None
    cfg = GpuRunConfig(
        out=out,
        results_dir=Path(a.results_dir),
        hardware_tag=a.hardware_tag,
        world_sizes=[a.world_size],
        backend=a.backend,
        size=a.size,
        budget_s=a.budget,
        check_timeout_s=a.timeout,
        baselines=tuple(a.baselines.split(",")),
        task_ids=a.task,
        levels=a.level,
    )
    t0 = time.monotonic()
    stats = GpuRun(cfg).run()
    print(f"wall {time.monotonic() - t0:.1f} s, stats {stats}")
    print(task_table(a.results_dir))
    print(format_acceptance(acceptance(a.results_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
