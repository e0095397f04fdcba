"""Run one shard in this process: `validate` on a rank pool, or a batch of `eval` samples, appending to
the shard's part file. Also the entry of the shard subprocesses the local executor starts:
`python -m mgbench.validation.executors.runner` reads the shard as JSON on stdin.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mgbench.paths import child_pythonpath
from mgbench.validation.executors.shard import Shard, done_in, missing
from mgbench.validation.pool import RankPool


@dataclass
class ShardOutcome:
    """How a shard ended, as the executor saw it."""

    name: str
    status: str  # ok | failed | cancelled | submitted
    items: int  # items it was given
    missing: int  # of those, still without a settled result afterwards
    message: str = ""

    def describe(self) -> str:
        extra = f": {self.message}" if self.message else ""
        return f"{self.name}: {self.status}, {self.items - self.missing}/{self.items} items done{extra}"


def run_shard(
    shard: Shard, part: Path | str | None = None, pool_factory: Callable[..., RankPool] = RankPool, quiet: bool = True
) -> int:
    """Run the shard's items that have no result in `part` (default: the shard's part file) yet;
    returns how many results it appended."""
    part = Path(part or shard.part)
    opts = dict(shard.options)
    if shard.kind == "validate":
        from mgbench.validation.run import validate

        res = validate(
            shard.source,
            part,
            world_sizes=[shard.world_size],
            backend=shard.backend,
            size=shard.size,
            timeout_s=float(opts.get("timeout_s", 60.0)),
            seed=int(opts.get("seed", 0)),
            task_ids=shard.items,
            quiet=quiet,
            pool_factory=pool_factory,
        )
        return len(res)
    if pool_factory is not RankPool:
        raise ValueError("eval shards run on one node (each sample gets a fresh single-node pool)")
    from mgbench.validation.eval.batch import run_batch
    from mgbench.validation.eval.runner import EvalOptions
    from mgbench.validation.eval.tasks import TaskInfo

    retry = bool(opts.pop("retry_errors", False))
    eval_opts = EvalOptions(world_size=shard.world_size, backend=shard.backend, size=shard.size, **opts)
    tasks = {tid: TaskInfo(**info) for tid, info in shard.tasks.items()}
    recs, _, _ = run_batch(
        shard.source, tasks, part, eval_opts, retry, quiet=quiet, only={Path(p).name for p in shard.items}
    )
    return len(recs)


def outcome_of(shard: Shard, status: str, message: str = "") -> ShardOutcome:
    """The outcome of a shard that ended, counting its items still missing from its part file."""
    left = missing(shard, done_in(shard.part, shard.kind))
    if status == "ok" and left:
        status, message = "failed", message or f"{len(left)} item(s) got no result"
    return ShardOutcome(shard.name, status, len(shard.items), len(left), message)


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a shard subprocess: ours, mgbench importable, plus `extra`."""
    return dict(os.environ, PYTHONPATH=child_pythonpath(os.environ.get("PYTHONPATH")), **extra)


def pin_cpus() -> None:
    """Pin this process (and the ranks it spawns) to MGBENCH_CPUS=0,1,... when set."""
    cpus = os.environ.get("MGBENCH_CPUS")
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})


def main(argv: list[str] | None = None) -> int:
    """Subprocess entry: the shard JSON on stdin; exit 0 when it ran to the end."""
    if hasattr(signal, "SIGUSR2"):  # the executor that started us handles preemption signals
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: the rank pool is closed
    pin_cpus()
    shard = Shard.from_json(sys.stdin.read())
    n = run_shard(shard, quiet=False)
    print(f"shard {shard.name}: {n} result(s) appended to {shard.part}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
