"""The `local` executor: shards on this node's GPUs (NCCL) or CPU cores (gloo).

Concurrent shards never share a device or a rendezvous port: each runs in its own subprocess with
CUDA_VISIBLE_DEVICES (or, on gloo, MGBENCH_CPUS: a CPU affinity) listing only its devices, and
MGBENCH_PORTS naming a port range no other running shard has (mgbench.validation.pool.free_port draws from
it). When only one shard fits at a time, shards run one after the other in this process instead.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import IO, Any

from mgbench.validation.executors.runner import ShardOutcome, child_env, outcome_of, run_shard
from mgbench.validation.executors.shard import Shard


def node_devices(backend: str) -> list[str]:
    """The devices of this node a shard can be given: visible GPU ids, or CPU ids for gloo."""
    if backend == "nccl":
        vis = os.environ.get("CUDA_VISIBLE_DEVICES")
        if vis is not None:
            return [d for d in vis.split(",") if d.strip()]
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    if hasattr(os, "sched_getaffinity"):
        return [str(c) for c in sorted(os.sched_getaffinity(0))]
    return [str(c) for c in range(os.cpu_count() or 1)]


@dataclass
class _Running:
    shard: Shard
    proc: subprocess.Popen
    devices: list[str]
    port_slot: int
    log: IO[Any]


@dataclass
class LocalExecutor:
    """Run shards on this node, as many at once as the devices allow."""

    ranks: int | None = None  # devices usable at once (default: all of this node's)
    port_base: int | None = None  # first port of the shards' ranges (default: from the pid)
    ports_per_shard: int = 64
    inline: bool | None = None  # None: in-process when only one shard fits at a time
    poll_s: float = 0.2
    quiet: bool = False
    command: list[str] = field(default_factory=lambda: [sys.executable, "-m", "mgbench.validation.executors.runner"])
    _running: list[_Running] = field(default_factory=list, repr=False)

    name = "local"

    def devices(self, backend: str) -> list[str]:
        devs = node_devices(backend)
        if self.ranks:
            if backend == "nccl" and self.ranks > len(devs):
                raise ValueError(f"--local-ranks {self.ranks}: this node has {len(devs)} visible GPU(s)")
            devs = [devs[i % len(devs)] for i in range(self.ranks)]  # gloo may oversubscribe cores
        return devs

    def concurrency(self, world_size: int, backend: str) -> int:
        return max(1, len(self.devices(backend)) // world_size)

    def run(self, shards: list[Shard]) -> list[ShardOutcome]:
        if not shards:
            return []
        inline = self.inline
        if inline is None:
            inline = all(self.concurrency(s.world_size, s.backend) == 1 for s in shards)
        return self._run_inline(shards) if inline else self._run_pooled(shards)

    def _say(self, msg: str) -> None:
        if not self.quiet:
            print(f"local: {msg}", flush=True)

    def _run_inline(self, shards: list[Shard]) -> list[ShardOutcome]:
        out = []
        for s in shards:
            self._say(f"{s.name}: {len(s.items)} item(s), in this process")
            try:
                run_shard(s, quiet=self.quiet)
                out.append(outcome_of(s, "ok"))
            except (RuntimeError, OSError, ValueError) as e:
                out.append(outcome_of(s, "failed", f"{type(e).__name__}: {e}"))
            self._say(out[-1].describe())
        return out

    def _run_pooled(self, shards: list[Shard]) -> list[ShardOutcome]:
        backend = shards[0].backend
        if any(s.backend != backend for s in shards):
            raise ValueError("one run of the local executor takes shards of one backend")
        devices = self.devices(backend)
        free = list(devices)
        free_ports = list(range(len(devices)))
        queue, out = list(shards), []
        try:
            while queue or self._running:
                for s in list(queue):
                    need = s.world_size if backend == "nccl" else min(s.world_size, len(devices))
                    if need > len(devices):
                        queue.remove(s)
                        out.append(outcome_of(s, "failed", f"needs {need} GPUs, this node has {len(devices)}"))
                    elif need <= len(free) and free_ports:
                        queue.remove(s)
                        self._start(s, [free.pop(0) for _ in range(need)], free_ports.pop(0))
                time.sleep(self.poll_s)
                for r in [r for r in self._running if r.proc.poll() is not None]:
                    self._running.remove(r)
                    r.log.close()
                    free.extend(r.devices)
                    free.sort(key=devices.index)
                    free_ports.append(r.port_slot)
                    rc = r.proc.returncode
                    out.append(
                        outcome_of(
                            r.shard,
                            "ok" if rc == 0 else "failed",
                            "" if rc == 0 else f"exit code {rc}; log {r.shard.part.with_suffix('.log')}",
                        )
                    )
                    self._say(out[-1].describe())
        finally:
            self.stop()
        return out

    def _port_range(self, slot: int) -> str:
        base = self.port_base or int(os.environ.get("MGBENCH_PORT_BASE", 0)) or 20000 + (os.getpid() * 64) % 30000
        lo = base + slot * self.ports_per_shard
        return f"{lo}-{lo + self.ports_per_shard - 1}"

    def _start(self, shard: Shard, devices: list[str], port_slot: int) -> None:
        env = child_env(MGBENCH_PORTS=self._port_range(port_slot))
        if shard.backend == "nccl":
            env["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
        else:
            env.update(CUDA_VISIBLE_DEVICES="", MGBENCH_CPUS=",".join(sorted(set(devices), key=int)))
        shard.part.parent.mkdir(parents=True, exist_ok=True)
        log = shard.part.with_suffix(".log").open("a")
        proc = subprocess.Popen(
            self.command, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env, text=True
        )
        proc.stdin.write(shard.to_json())
        proc.stdin.close()
        self._running.append(_Running(shard, proc, devices, port_slot, log))
        self._say(
            f"{shard.name}: {len(shard.items)} item(s) on {'GPUs' if shard.backend == 'nccl' else 'CPUs'} "
            f"{','.join(devices)}, ports {env['MGBENCH_PORTS']}"
        )

    def stop(self, grace_s: float = 15.0) -> None:
        """Terminate the running shard subprocesses (they close their rank pools on SIGTERM)."""
        for r in self._running:
            if r.proc.poll() is None:
                r.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for r in self._running:
            try:
                r.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                r.proc.kill()
                r.proc.wait()
            r.log.close()
        self._running.clear()
