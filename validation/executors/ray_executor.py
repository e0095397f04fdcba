"""The `ray` executor: each shard a Ray task reserving its GPUs (num_gpus = world size; gloo: num_cpus),
a shard wider than one node a placement group of one bundle per node, each bundle running that node's
part (mgbench.validation.executors.cluster) with the head's address taken from bundle 0's node.

Shards travel with their files (mgbench.validation.executors.bundle): workers need mgbench and torch, not the
driver's file system. Records come back to the driver, which appends them to the shard's part file as
each shard finishes, so stopping the driver loses only the shards still running.
ray is imported here only, when the executor is used.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from mgbench.store import append_jsonl
from mgbench.validation.executors.bundle import pack, run_packed, run_packed_node
from mgbench.validation.executors.runner import ShardOutcome, outcome_of
from mgbench.validation.executors.shard import Shard


@dataclass
class RayOptions:
    address: str | None = None  # None: RAY_ADDRESS or a new local instance
    ranks_per_node: int | None = None  # GPUs (gloo: CPUs) per node; default: the most any node has
    max_retries: int = 2  # Ray retries of a shard whose worker died
    strategy: str = "PACK"  # placement of a wide shard's bundles (STRICT_SPREAD: a node each)
    init: dict[str, Any] = field(default_factory=dict)  # more ray.init() arguments


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RuntimeError("--executor ray needs ray (pip install 'mgbench[scale]')") from None
    return ray


@dataclass
class RayExecutor:
    opts: RayOptions = field(default_factory=RayOptions)
    quiet: bool = False

    name = "ray"

    def _connect(self) -> Any:
        ray = _ray()
        if not ray.is_initialized():
            ray.init(address=self.opts.address, log_to_driver=False, **self.opts.init)
        return ray

    def ranks_per_node(self, backend: str) -> int:
        if self.opts.ranks_per_node:
            return self.opts.ranks_per_node
        ray = self._connect()
        key = "GPU" if backend == "nccl" else "CPU"
        return int(max((n["Resources"].get(key, 0) for n in ray.nodes() if n.get("Alive")), default=0))

    def concurrency(self, world_size: int, backend: str) -> int:
        key = "GPU" if backend == "nccl" else "CPU"
        return max(1, int(self._connect().cluster_resources().get(key, 0)) // world_size)

    def _say(self, msg: str) -> None:
        if not self.quiet:
            print(f"ray: {msg}", flush=True)

    def _submit(self, shard: Shard) -> tuple[Any, Any]:
        """Start a shard; returns (the ref whose value is its records, the placement group or None)."""
        ray = self._connect()
        rpn = max(1, self.ranks_per_node(shard.backend))
        payload = pack(shard)
        unit = {"num_gpus": 1} if shard.backend == "nccl" else {"num_cpus": 1}
        extra = {"accelerator_type": shard.hardware} if shard.hardware else {}
        if shard.world_size <= rpn:
            task = ray.remote(run_packed).options(
                max_retries=self.opts.max_retries, **{k: v * shard.world_size for k, v in unit.items()}, **extra
            )
            return task.remote(payload), None
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        nodes = -(-shard.world_size // rpn)
        key = "num_gpus" if shard.backend == "nccl" else "num_cpus"
        pg = placement_group([{"GPU" if key == "num_gpus" else "CPU": float(rpn)}] * nodes, strategy=self.opts.strategy)
        rdv, authkey = ray.remote(num_cpus=0)(Rendezvous).remote(), secrets.token_hex(16)
        refs = [
            ray.remote(wide_node)
            .options(
                max_retries=0,
                **{key: float(rpn)},
                scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i),
            )
            .remote(payload, i, nodes, rdv, authkey)
            for i in range(nodes)
        ]
        return refs[0], (pg, refs[1:] + [rdv])

    def run(self, shards: list[Shard]) -> list[ShardOutcome]:
        ray = self._connect()
        running: dict[Any, tuple[Shard, Any]] = {}
        for s in shards:
            ref, pg = self._submit(s)
            running[ref] = (s, pg)
            self._say(f"{s.name}: {len(s.items)} item(s) submitted")
        out: list[ShardOutcome] = []
        while running:
            done, _ = ray.wait(list(running), num_returns=1)
            shard, pg = running.pop(done[0])
            try:
                for rec in ray.get(done[0]):
                    append_jsonl(shard.part, rec)
                out.append(outcome_of(shard, "ok"))
            except Exception as e:  # noqa: BLE001 - a shard's failure is reported, the others go on
                out.append(outcome_of(shard, "failed", f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200]}"))
            if pg is not None:
                self._release(*pg)
            self._say(out[-1].describe())
        return out

    def _release(self, pg: Any, others: list[Any]) -> None:
        """Let a wide shard's agents end (they stop when the head does), then free the bundles."""
        from ray.util.placement_group import remove_placement_group

        ray = self._connect()
        *agents, rdv = others
        _, running = ray.wait(agents, num_returns=len(agents), timeout=60)
        # Cancel only agents still running: force-cancelling a task that has just finished races with
        # its completion inside Ray's core worker, which aborts the driver process (Ray 2.60: "Check
        # failed: it != submissible_tasks_.end() Tried to complete task that was not pending").
        for ref in running:
            ray.cancel(ref, force=True)
        ray.kill(rdv)
        remove_placement_group(pg)


class Rendezvous:
    """A Ray actor holding the head's address of a wide shard until its agents have read it."""

    def __init__(self) -> None:
        self.address: tuple[str, int] | None = None

    def set(self, address: tuple[str, int]) -> None:
        self.address = address

    def get(self) -> tuple[str, int] | None:
        return self.address


def wide_node(
    payload: dict[str, Any], node: int, nodes: int, rdv: Any, authkey: str, timeout_s: float = 600.0
) -> list[dict[str, Any]]:
    """A Ray task on one bundle of a wide shard: node 0 publishes its address and runs the head."""
    import ray

    from mgbench.validation.pool import free_port

    if node == 0:
        head, port = ray.util.get_node_ip_address(), free_port()
        ray.get(rdv.set.remote((head, port)))
    else:
        deadline = time.monotonic() + timeout_s
        while (addr := ray.get(rdv.get.remote())) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the head of the shard did not start within {timeout_s:.0f}s")
            time.sleep(0.5)
        head, port = addr
    return run_packed_node(payload, node, nodes, head, port, authkey)
