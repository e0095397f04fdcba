"""The `slurm` executor: shards submitted as a submitit job array, one job per node's worth of ranks.

A job (NodeJob) holds the shards one node runs: as many at once as its GPUs allow, each on its own
GPUs and ports (the local executor, inside the job; the port ranges start at the job's
TorchDistributedEnvironment master port). A shard wider than one node gets a job of several nodes,
one task per node: TorchDistributedEnvironment gives each its node index and the head's address and
port (mgbench.validation.executors.cluster). Jobs are Checkpointable: on preemption or the time limit
submitit calls checkpoint(), which resubmits the job with only the items that have no result yet.

`cluster="local"` runs the same code through submitit's LocalExecutor (no SLURM; tests, debugging).
submitit is imported here only, when the executor is used.
"""

from __future__ import annotations

import contextlib
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from mgbench.store import append_jsonl, latest_by
from mgbench.validation.executors.local import LocalExecutor
from mgbench.validation.executors.runner import ShardOutcome, outcome_of
from mgbench.validation.executors.shard import Shard, done_in, missing, parts_dir


@dataclass
class SlurmOptions:
    partition: str | None = None
    time_min: int = 240
    gpus_per_node: int = 8  # NCCL: GPUs a job asks for; gloo: CPU ranks per job
    array_parallelism: int | None = None  # at most this many jobs (nodes) at once
    cpus_per_task: int | None = None
    mem_gb: float | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    setup: list[str] = field(default_factory=list)  # shell lines run before each job
    extra: dict[str, Any] = field(default_factory=dict)  # more sbatch options (slurm_additional_parameters)
    folder: str = "submitit-logs"
    cluster: str | None = "slurm"  # "local": submitit.LocalExecutor on this machine
    wait: bool = True


class NodeJob:
    """One job of the array: run `shards` on this node (or on this job's nodes, for a wide shard).

    Checkpointable the way submitit defines it (the protocol of submitit.helpers.Checkpointable,
    without importing submitit here): on preemption or timeout submitit calls checkpoint() and
    requeues the DelayedSubmission it returns, here a NodeJob of the items that have no result yet.
    """

    def __init__(self, shards: list[Shard], ranks_per_node: int, authkey: str = ""):
        self.shards, self.ranks_per_node, self.authkey = shards, ranks_per_node, authkey
        self._local: LocalExecutor | None = None

    def __call__(self) -> list[ShardOutcome]:
        from submitit.helpers import TorchDistributedEnvironment

        env = TorchDistributedEnvironment()
        if self.authkey:  # one wide shard over env.world_size nodes, one task per node
            from mgbench.validation.executors.cluster import run_node

            (shard,) = self.shards
            run_node(shard, env.rank, env.world_size, env.master_addr, env.master_port, bytes.fromhex(self.authkey))
            return [outcome_of(shard, "ok")] if env.rank == 0 else []
        at_once = max(1, self.ranks_per_node // max(s.world_size for s in self.shards)) if self.shards else 1
        self._local = LocalExecutor(
            ranks=self.ranks_per_node,
            inline=True if at_once == 1 else None,
            port_base=min(env.master_port, 65535 - 64 * max(1, self.ranks_per_node)),
        )
        return self._local.run(self.shards)

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """Preempted or timed out: stop the shards and resubmit the items without a result."""
        from submitit.helpers import DelayedSubmission

        if self._local is not None:
            self._local.stop()
        left = [s.only(missing(s, done_in(s.part, s.kind))) for s in self.shards]
        return DelayedSubmission(NodeJob([s for s in left if s.items], self.ranks_per_node, self.authkey))

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_local": None}


def group(shards: list[Shard], ranks_per_node: int) -> list[tuple[list[Shard], int]]:
    """Jobs as (shards, nodes): narrow shards packed `ranks_per_node // world_size` to a job (they run
    at once on its node), a shard wider than a node alone on ceil(world_size / ranks_per_node) nodes."""
    jobs: list[tuple[list[Shard], int]] = []
    by_ws: dict[tuple[int, str], list[Shard]] = {}
    for s in shards:
        if s.world_size > ranks_per_node:
            jobs.append(([s], -(-s.world_size // ranks_per_node)))
        else:
            by_ws.setdefault((s.world_size, s.backend), []).append(s)
    for (ws, _), group_ in sorted(by_ws.items()):
        per = max(1, ranks_per_node // ws)
        jobs += [(group_[i : i + per], 1) for i in range(0, len(group_), per)]
    return jobs


@dataclass
class SlurmExecutor:
    opts: SlurmOptions = field(default_factory=SlurmOptions)
    quiet: bool = False
    jobs: list[Any] = field(default_factory=list, repr=False)  # the submitit jobs of the last run

    name = "slurm"

    def concurrency(self, world_size: int, backend: str) -> int:
        per_node = max(1, self.opts.gpus_per_node // world_size)
        return per_node * (self.opts.array_parallelism or 8)

    def _executor(self, nodes: int, backend: str, hardware: str) -> Any:
        import submitit

        o = self.opts
        ex = submitit.AutoExecutor(folder=o.folder, cluster=o.cluster)
        local = o.cluster == "local"
        params: dict[str, Any] = {
            "timeout_min": o.time_min,
            "nodes": 1 if local else nodes,
            "tasks_per_node": nodes if local else 1,
            "name": "mgbench",
            "gpus_per_node": (o.gpus_per_node * (nodes if local else 1)) if backend == "nccl" else 0,
            "cpus_per_task": o.cpus_per_task or (o.gpus_per_node * 2 if backend == "nccl" else o.gpus_per_node),
            "slurm_partition": o.partition,
            "slurm_account": o.account,
            "slurm_qos": o.qos,
            "slurm_constraint": o.constraint or hardware or None,
            "slurm_array_parallelism": o.array_parallelism,
            "slurm_setup": o.setup or None,
            "slurm_additional_parameters": o.extra or None,
            "mem_gb": o.mem_gb,
        }
        ex.update_parameters(**{k: v for k, v in params.items() if v is not None})
        return ex

    def submit(self, shards: list[Shard]) -> list[tuple[Any, list[Shard]]]:
        """Submit the shards, one job array per job shape (nodes); returns (job, shards) pairs."""
        try:
            import submitit  # noqa: F401
        except ImportError:
            raise RuntimeError("--executor slurm needs submitit (pip install 'mgbench[scale]')") from None
        rpn = self.opts.gpus_per_node
        shapes: dict[int, list[list[Shard]]] = {}
        for members, nodes in group(shards, rpn):
            shapes.setdefault(nodes, []).append(members)
        out: list[tuple[Any, list[Shard]]] = []
        for nodes, jobs in sorted(shapes.items()):
            ex = self._executor(nodes, jobs[0][0].backend, jobs[0][0].hardware)
            with sigint_deliverable(self.opts.cluster == "local"):
                handles = ex.submit_array([NodeJob(m, rpn, secrets.token_hex(16) if nodes > 1 else "") for m in jobs])
            out += list(zip(handles, jobs))
        for job, members in out:
            self._say(f"job {job.job_id}: {', '.join(s.name for s in members)}")
        self.jobs = [j for j, _ in out]
        return out

    def _say(self, msg: str) -> None:
        if not self.quiet:
            print(f"slurm: {msg}", flush=True)

    def run(self, shards: list[Shard]) -> list[ShardOutcome]:
        """Submit, then wait (or not: --slurm-no-wait). Shards whose job from an earlier run is still
        queued or running are not submitted again."""
        queued = queued_shards(shards) if self.opts.cluster == "slurm" else {}
        out = [
            ShardOutcome(s.name, "submitted", len(s.items), len(s.items), f"still queued as job {queued[s.name]}")
            for s in shards
            if s.name in queued
        ]
        submitted = self.submit([s for s in shards if s.name not in queued])
        for job, members in submitted:
            for s in members:
                append_jsonl(parts_dir(s.results) / JOBS_FILE, {"shard": s.name, "job_id": str(job.job_id)})
        if not self.opts.wait:
            return out + [
                ShardOutcome(s.name, "submitted", len(s.items), len(s.items), f"job {j.job_id}")
                for j, members in submitted
                for s in members
            ]
        out += self.wait(submitted)
        self.jobs = []
        return out

    def wait(self, submitted: list[tuple[Any, list[Shard]]], poll_s: float = 2.0) -> list[ShardOutcome]:
        """Wait for the jobs; a shard's outcome is read from its part file (a job may have been requeued)."""
        out: list[ShardOutcome] = []
        pending = list(submitted)
        while pending:
            for job, members in [p for p in pending if p[0].done()]:
                pending.remove((job, members))
                try:
                    job.results()
                    status, msg = "ok", ""
                except Exception as e:  # noqa: BLE001 - the job's failure is reported per shard
                    status, msg = "failed", f"job {job.job_id}: {str(e).strip().splitlines()[-1][:200]}"
                for s in members:
                    out.append(outcome_of(s, status, msg))
                    self._say(out[-1].describe())
            if pending:
                time.sleep(poll_s)
        return out


JOBS_FILE = "slurm-jobs.jsonl"


@contextlib.contextmanager
def sigint_deliverable(local: bool) -> Iterator[None]:
    """Start local jobs with SIGINT deliverable, even when this process ignores it.

    submitit's local cancel() is a SIGINT to the job's controller. A process started in the
    background without job control (`cmd &` in a script, nohup, some CI runners) has SIGINT set to
    SIG_IGN, children inherit an ignored signal across exec, and the cancel would then do nothing: the
    job ran on to the end. While the controllers are started, SIGINT has Python's default handler
    here, which exec resets to SIG_DFL in the child.
    """
    ignored = (
        local
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    )
    if not ignored:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def queued_shards(shards: list[Shard]) -> dict[str, str]:
    """{shard name: job id} of the shards whose last submitted job `squeue` still lists."""
    if not shards:
        return {}
    ledger = latest_by(parts_dir(shards[0].results) / JOBS_FILE, lambda r: r["shard"])
    if not ledger:
        return {}
    try:
        listed = subprocess.run(
            ["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True, timeout=60, check=True
        ).stdout.split()
    except (OSError, subprocess.SubprocessError) as e:
        print(f"slurm: warning: squeue failed ({e}); shards of earlier runs may be submitted twice", flush=True)
        return {}
    names = {s.name for s in shards}
    return {n: r["job_id"] for n, r in ledger.items() if n in names and r["job_id"] in set(listed)}
