"""A rank process: joins the process group once, then serves jobs from the pool until told to stop.

A job comes over the pipe as Job.wire() (mgbench.validation.jobs): its kind picks the record type and the
handler in HANDLERS; the handler gets (the rebuilt record, ctx) and returns a dict.
After every job the ranks exchange the job's sequence number, so a task that left collectives
unmatched (desynchronized ranks) is detected and the pool restarted. A rank whose job failed does so
only once every rank's job has failed too (else it answers out of sync at once, and its error reaches
the pool while the others still wait inside the job).
"""

from __future__ import annotations

import gc
import os
import pickle
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from mgbench import backends
from mgbench.validation import p2p_staging
from mgbench.validation.contract import load_module
from mgbench.validation.jobs import STEP, CheckJob, EchoStreamJob, Job, PingJob, is_step_end


@dataclass
class RankContext:
    rank: int
    world_size: int
    backend: str
    device: torch.device
    modules: dict[str, Any] = field(default_factory=dict)
    conn: Any = None  # the pipe to the pool

    def exchange(self, step: dict[str, Any]) -> Any:
        """One step of a streamed job: send `step` to the pool; return its answer (the job's next message,
        or jobs.STEP_END)."""
        self.conn.send({STEP: True, **step})
        return self.conn.recv()

    def module(self, path: str, content_hash: str = "") -> Any:
        """Load a task module once per (path, hash) in this rank process."""
        key = f"{path}:{content_hash}"
        if key not in self.modules:
            self.modules[key] = load_module(path)
        return self.modules[key]


def _check_job(job: CheckJob, ctx: RankContext) -> dict[str, Any]:
    from mgbench.validation.checks import run_checks

    mod = ctx.module(job.path, job.content_hash)
    if job.shape is not None:  # a held-out shape (validation/eval/shapes.py) under its own size-class name
        mod.SIZES[job.size] = dict(job.shape)
    if ctx.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(ctx.device)
    try:
        verdict = run_checks(
            mod,
            ctx.rank,
            ctx.world_size,
            ctx.device,
            job.size,
            job.seed,
            has_oracle=job.has_oracle,
            oracle_in_turns=backends.backend(ctx.backend).shares_devices,
        )
        if ctx.device.type == "cuda":  # what this rank held at most: whether N ranks fit on one GPU
            verdict["peak_memory_bytes"] = torch.cuda.max_memory_allocated(ctx.device)
        return verdict
    finally:
        if ctx.device.type == "cuda":  # an idle pool holds no cached blocks that pools beside it need
            gc.collect()
            torch.cuda.empty_cache()


def _ping_job(job: PingJob, ctx: RankContext) -> dict[str, Any]:
    t = torch.tensor([ctx.rank], device=ctx.device)
    dist.all_reduce(t)
    return {"sum": int(t.item())}


def _echo_stream_job(job: EchoStreamJob, ctx: RankContext) -> dict[str, Any]:
    steps, msg = 0, job.first
    while not is_step_end(msg):
        # `early`: the pool's next message was already waiting before this step was sent (it must never be)
        size = len(msg) if isinstance(msg, bytes | str) else 0
        msg = ctx.exchange({"call": steps, "size": size, "early": ctx.conn.poll(0)})
        steps += 1
    return {"steps": steps}


Handler = Callable[[Any, RankContext], dict[str, Any]]  # (a Job record of its kind, ctx) -> result
# job kind -> (its record type, its handler)
HANDLERS: dict[str, tuple[type[Job], Handler]] = {
    CheckJob.kind: (CheckJob, _check_job),
    PingJob.kind: (PingJob, _ping_job),
    EchoStreamJob.kind: (EchoStreamJob, _echo_stream_job),
}


def register(record_type: type[Job], handler: Handler) -> None:
    """Handle the jobs of `record_type` (its `kind`) with `handler` in this rank process."""
    HANDLERS[record_type.kind] = (record_type, handler)


def handle(wire: tuple[str, dict[str, Any]], ctx: RankContext) -> dict[str, Any]:
    """Run a job as it came over the pipe (Job.wire()): rebuild its record, call its handler."""
    kind, values = wire
    record_type, handler = HANDLERS[kind]
    return handler(record_type(**values), ctx)


FAILED_WAIT_S = 5.0  # how long a rank whose job failed waits to learn whether every rank's job failed


def _all_failed(seq: int, ctx: RankContext) -> bool:
    """Whether every rank's job `seq` failed as this one's did, learnt through the process group's store
    (no collective), within FAILED_WAIT_S."""
    store = dist.distributed_c10d._get_default_store()
    store.set(f"mgbench/failed/{seq}/{ctx.rank}", "1")
    try:
        store.wait([f"mgbench/failed/{seq}/{r}" for r in range(ctx.world_size)], timedelta(seconds=FAILED_WAIT_S))
    except Exception:  # noqa: BLE001 - the store's timeout: some rank's job has not failed
        return False
    return True


def _in_sync(seq: int, ctx: RankContext) -> bool:
    mine = torch.tensor([seq, -seq], dtype=torch.int64, device=ctx.device)
    dist.all_reduce(mine, op=dist.ReduceOp.MAX)
    return int(mine[0]) == seq and int(mine[1]) == -seq


CPU_GLOO_VAR = "MGBENCH_CPU_GLOO"  # set to "1" in a pool's env: its NCCL ranks give CPU tensors a gloo backend


def run_compiled_eagerly() -> None:
    """Make every torch.compile'd function of this process run as plain Python (dynamo skips each frame;
    torch reads the setting at each call, so functions decorated before or after both run eagerly)."""
    import torch._dynamo

    torch._dynamo.config.disable = True


def worker_main(
    rank: int,
    world_size: int,
    backend: str,
    init_method: str,
    conn: Any,
    timeout_s: float,
    env: dict[str, str],
    extra_handlers: list[str],
) -> None:
    """Entry of a spawned rank process."""
    os.environ.update(env)
    warnings.simplefilter("ignore")
    kind = backends.backend(backend)
    if kind.on_gpu:  # round-robin over the visible GPUs: rank r on GPU r, or every rank on one GPU
        local = backends.gpu_of_rank(rank, torch.cuda.device_count())
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    if kind.process_group == "gloo":
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
    if kind.stage_p2p_through_host:
        p2p_staging.install()  # before any task module is imported, so tasks see the staged names
    if kind.compile_eagerly:
        run_compiled_eagerly()
    for modname in extra_handlers:
        __import__(modname)  # modules that call register() for extra job kinds (timing, eval...)
    kwargs = {"device_id": device} if kind.gpu_per_rank else {}
    # CPU_GLOO_VAR=1: CPU tensors on an NCCL pool go to gloo, as with torch's default backend
    pg_backend = "cpu:gloo,cuda:nccl" if backend == "nccl" and env.get(CPU_GLOO_VAR) == "1" else kind.process_group
    dist.init_process_group(
        pg_backend,
        init_method=init_method,
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=timeout_s),
        **kwargs,
    )
    ctx = RankContext(rank, world_size, backend, device, conn=conn)
    conn.send({"ready": True, "rank": rank})
    seq = 0
    while True:
        job = conn.recv()
        if job is None:
            break
        seq += 1
        reply: dict[str, Any]
        try:
            reply = {"ok": True, "result": handle(job, ctx)}
        except Exception as e:  # noqa: BLE001 - a task's failure is data, not a crash
            tb = traceback.extract_tb(e.__traceback__)
            where = next((f"{os.path.basename(f.filename)}:{f.lineno}" for f in reversed(tb)), "")
            reply = {
                "ok": False,
                "error": f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''} ({where})",
            }
        try:
            if kind.on_gpu:
                torch.cuda.synchronize()
            # a rank whose job failed alone answers at once: the others are still inside the job's own
            # collectives, which the sequence check's collective would meet (a hang or gloo's size abort)
            reply["in_sync"] = _in_sync(seq, ctx) if reply["ok"] or _all_failed(seq, ctx) else False
        except Exception as e:  # noqa: BLE001
            reply["in_sync"] = False
            reply.setdefault("error", f"sync failed: {type(e).__name__}")
        send_reply(conn, reply)
    dist.destroy_process_group()


def send_reply(conn: Any, reply: dict[str, Any]) -> None:
    """Send a job's reply to the pool. A reply that cannot be pickled (in a rank whose address space was capped,
    a large result's pickle is a MemoryError) goes as a short error reply instead: the pool then hears of a
    failed job, and can read the rank's limits before it tears the pool down, not of a dead rank."""
    try:
        conn.send(reply)
    except (MemoryError, pickle.PicklingError, TypeError, AttributeError) as e:
        conn.send({"ok": False, "in_sync": False, "error": f"{type(e).__name__}: the reply could not be sent"})
