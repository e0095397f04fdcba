"""The command-line options of the executors (argparse only: registering them imports nothing heavy)."""

from __future__ import annotations

import argparse


def add_executor_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("scale-out: shards on an engine (docs/scale-out.md)")
    g.add_argument(
        "--executor",
        choices=["local", "slurm", "ray"],
        help="split the work into shards and run them on this node (local), as a SLURM job array "
        "(submitit) or as Ray tasks; results are merged into the same JSONL store",
    )
    g.add_argument(
        "--shards",
        type=int,
        default=0,
        help="shards per world size (default: enough to fill the executor, at most 64 items each)",
    )
    g.add_argument(
        "--hardware-kind", default="", help="hardware the shards need: SLURM constraint / Ray accelerator type"
    )
    g.add_argument(
        "--local-ranks", type=int, help="local: GPUs (nccl) or CPU ranks (gloo) to use at once (default: all)"
    )
    g.add_argument("--slurm-partition")
    g.add_argument(
        "--slurm-time",
        type=int,
        default=240,
        help="minutes per job (default: %(default)s); a job "
        "that reaches it is checkpointed and requeued with what is left",
    )
    g.add_argument("--slurm-nodes", type=int, help="at most this many jobs (nodes) at once (array parallelism)")
    g.add_argument(
        "--slurm-gpus-per-node",
        type=int,
        default=8,
        help="GPUs per job (gloo: CPU ranks per job; default: %(default)s); shards wider than this span several nodes",
    )
    g.add_argument("--slurm-cpus-per-task", type=int)
    g.add_argument("--slurm-mem-gb", type=float)
    g.add_argument("--slurm-account")
    g.add_argument("--slurm-qos")
    g.add_argument("--slurm-constraint")
    g.add_argument("--slurm-setup", action="append", default=[], help="shell line run before each job (repeatable)")
    g.add_argument(
        "--slurm-extra",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="another sbatch option, e.g. exclusive=true (repeatable)",
    )
    g.add_argument("--slurm-folder", help="submitit logs and job pickles (default: RESULTS.parts/submitit)")
    g.add_argument("--slurm-no-wait", action="store_true", help="submit and return; re-run the command later to merge")
    g.add_argument("--slurm-local", action="store_true", help="submitit's LocalExecutor: the same jobs on this machine")
    g.add_argument("--ray-address", help="Ray cluster address (default: RAY_ADDRESS, else a local instance)")
    g.add_argument("--ray-gpus-per-node", type=int, help="GPUs per node for wide shards (default: from the cluster)")
    g.add_argument("--ray-max-retries", type=int, default=2, help="Ray retries of a shard whose worker died")
