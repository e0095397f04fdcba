"""A rank process: joins the process group once, then serves jobs from the pool until told to stop.

Job handlers are looked up by job["kind"] in HANDLERS; each gets (job, ctx) and returns a dict.
After every job the ranks exchange the job's sequence number, so a task that left collectives
unmatched (desynchronized ranks) is detected and the pool restarted.
"""

from __future__ import annotations

import os
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from mgbench.validation.contract import load_module


@dataclass
class RankContext:
    rank: int
    world_size: int
    backend: str
    device: torch.device
    modules: dict[str, Any] = field(default_factory=dict)

    def module(self, path: str, content_hash: str = "") -> Any:
        """Load a task module once per (path, hash) in this rank process."""
        key = f"{path}:{content_hash}"
        if key not in self.modules:
            self.modules[key] = load_module(path)
        return self.modules[key]


def _check_job(job: dict[str, Any], ctx: RankContext) -> dict[str, Any]:
    from mgbench.validation.checks import run_checks

    mod = ctx.module(job["path"], job.get("content_hash", ""))
    return run_checks(
        mod, ctx.rank, ctx.world_size, ctx.device, job["size"], job["seed"], has_oracle=job.get("has_oracle", True)
    )


def _ping_job(job: dict[str, Any], ctx: RankContext) -> dict[str, Any]:
    t = torch.tensor([ctx.rank], device=ctx.device)
    dist.all_reduce(t)
    return {"sum": int(t.item())}


HANDLERS: dict[str, Callable[[dict[str, Any], RankContext], dict[str, Any]]] = {"check": _check_job, "ping": _ping_job}


def register(kind: str, handler: Callable[[dict[str, Any], RankContext], dict[str, Any]]) -> None:
    HANDLERS[kind] = handler


def _in_sync(seq: int, ctx: RankContext) -> bool:
    mine = torch.tensor([seq, -seq], dtype=torch.int64, device=ctx.device)
    dist.all_reduce(mine, op=dist.ReduceOp.MAX)
    return int(mine[0]) == seq and int(mine[1]) == -seq


CPU_GLOO_VAR = "MGBENCH_CPU_GLOO"  # set to "1" in a pool's env: its NCCL ranks give CPU tensors a gloo backend


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
    if backend == "nccl":
        local = rank % max(1, torch.cuda.device_count())
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
        device = torch.device("cpu")
    for modname in extra_handlers:
        __import__(modname)  # modules that call register() for extra job kinds (timing, eval...)
    kwargs = {"device_id": device} if backend == "nccl" else {}
    # CPU_GLOO_VAR=1: CPU tensors on an NCCL pool go to gloo, as with torch's default backend
    pg_backend = "cpu:gloo,cuda:nccl" if backend == "nccl" and env.get(CPU_GLOO_VAR) == "1" else backend
    dist.init_process_group(
        pg_backend,
        init_method=init_method,
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=timeout_s),
        **kwargs,
    )
    ctx = RankContext(rank, world_size, backend, device)
    conn.send({"ready": True, "rank": rank})
    seq = 0
    while True:
        job = conn.recv()
        if job is None:
            break
        seq += 1
        reply: dict[str, Any]
        try:
            reply = {"ok": True, "result": HANDLERS[job["kind"]](job, ctx)}
        except Exception as e:  # noqa: BLE001 - a task's failure is data, not a crash
            tb = traceback.extract_tb(e.__traceback__)
            where = next((f"{os.path.basename(f.filename)}:{f.lineno}" for f in reversed(tb)), "")
            reply = {
                "ok": False,
                "error": f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''} ({where})",
            }
        try:
            if backend == "nccl":
                torch.cuda.synchronize()
            reply["in_sync"] = _in_sync(seq, ctx)
        except Exception as e:  # noqa: BLE001
            reply["in_sync"] = False
            reply.setdefault("error", f"sync failed: {type(e).__name__}")
        conn.send(reply)
    dist.destroy_process_group()
