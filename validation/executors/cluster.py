"""Shards wider than one node: a rank pool whose ranks live on several nodes.

Node 0 runs the head: the shard's driver (validate() on a ClusterPool) plus this node's agent in a
thread. Every other node runs an agent. Agents connect to the head's control port (the rendezvous
address SLURM/submitit or Ray hands out); on the head's orders each starts or kills its node's rank
processes, which connect back to the head over TCP (multiprocessing.connection, HMAC-authenticated
with a per-shard key) and then serve jobs exactly like the ranks of a local RankPool. A hung or
desynchronized task restarts all nodes' ranks, as on one node.

`python -m mgbench.validation.executors.cluster` runs one node's role from a JSON spec on stdin (Ray starts
it so); SLURM jobs call run_node() directly.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import socket
import sys
import threading
import time
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

from mgbench.validation.executors.shard import Shard
from mgbench.validation.pool import RankPool, free_port
from mgbench.validation.worker import worker_main


def node_ranks(node: int, world_size: int, nodes: int) -> list[int]:
    """The global ranks node `node` of `nodes` hosts (contiguous blocks, so rank % per-node = local GPU)."""
    per = -(-world_size // nodes)
    return list(range(node * per, min(world_size, (node + 1) * per)))


def _rank_entry(
    rank: int,
    world_size: int,
    backend: str,
    init: str,
    address: Any,
    authkey: bytes,
    pg_timeout_s: float,
    env: dict[str, str],
    extra: list[str],
) -> None:
    worker_main(rank, world_size, backend, init, Client(address, authkey=authkey), pg_timeout_s, env, extra)


def connect(address: tuple[str, int], authkey: bytes, timeout_s: float) -> Connection:
    """Connect to a listener that may not be up yet."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return Client(address, authkey=authkey)
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no head listening at {address[0]}:{address[1]} after {timeout_s:.0f}s") from None
            time.sleep(0.5)


def serve_agent(head: tuple[str, int], authkey: bytes, ranks: list[int], timeout_s: float = 600.0) -> None:
    """A node's agent: start/kill this node's rank processes when the head says so, until it is done."""
    ctrl = connect(head, authkey, timeout_s)
    ctrl.send({"ranks": ranks})
    ctx = mp.get_context("spawn")
    procs: list[Any] = []
    try:
        while True:
            try:
                msg = ctrl.recv()
            except (EOFError, OSError):
                break
            _kill(procs)
            if msg["op"] == "start":
                procs = [
                    ctx.Process(
                        target=_rank_entry,
                        daemon=True,
                        args=(
                            r,
                            msg["world_size"],
                            msg["backend"],
                            msg["init"],
                            msg["address"],
                            authkey,
                            msg["pg_timeout_s"],
                            msg["env"],
                            msg["extra"],
                        ),
                    )
                    for r in ranks
                ]
                for p in procs:
                    p.start()
            elif msg["op"] == "stop":
                break
            ctrl.send(msg["op"])
    finally:
        _kill(procs)
        ctrl.close()


def _kill(procs: list[Any]) -> None:
    for p in procs:
        if p.is_alive():
            p.kill()
    for p in procs:
        p.join(timeout=10)
    procs.clear()


class _Remote:
    """Stands for a rank process on another node where RankPool.run looks at one."""

    exitcode = None

    def join(self, timeout: float | None = None) -> None:
        return None


class ClusterPool(RankPool):
    """A RankPool whose ranks the agents start on their nodes; `agents` are the control links."""

    def __init__(
        self,
        world_size: int,
        backend: str,
        agents: list[Connection],
        host: str,
        authkey: bytes,
        pg_timeout_s: float = 300.0,
        startup_timeout_s: float = 300.0,
        **kw: Any,
    ):
        super().__init__(world_size, backend, pg_timeout_s=pg_timeout_s, startup_timeout_s=startup_timeout_s, **kw)
        self.agents, self.host, self.authkey = agents, host, authkey

    def _order(self, op: str, deadline: float, **fields: Any) -> None:
        for a in self.agents:
            a.send({"op": op, **fields})
        for a in self.agents:
            if not a.poll(max(0.0, deadline - time.monotonic())) or a.recv() != op:
                raise RuntimeError(f"a node agent did not confirm {op!r}")

    def start(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        listener = Listener((self.host, 0), authkey=self.authkey)
        accepted: list[Connection] = []
        t = threading.Thread(target=_accept, args=(listener, self.world_size, accepted), daemon=True)
        t.start()
        try:
            self._order(
                "start",
                deadline,
                world_size=self.world_size,
                backend=self.backend,
                init=f"tcp://{self.host}:{free_port()}",
                address=listener.address,
                pg_timeout_s=self.pg_timeout_s,
                env=self.env,
                extra=self.extra_handlers,
            )
            t.join(max(0.0, deadline - time.monotonic()))
            if len(accepted) < self.world_size:
                raise RuntimeError(
                    f"{len(accepted)} of {self.world_size} ranks connected within {self.startup_timeout_s:.0f}s"
                )
            by_rank: dict[int, Connection] = {}
            for c in accepted:
                if not c.poll(max(0.0, deadline - time.monotonic())):
                    raise RuntimeError(f"a rank did not start within {self.startup_timeout_s:.0f}s")
                by_rank[c.recv()["rank"]] = c
        except (RuntimeError, EOFError, OSError) as e:
            for c in accepted:
                c.close()
            self.kill()
            raise RuntimeError(f"cluster pool: {e}") from None
        finally:
            listener.close()
        self.conns = [by_rank[r] for r in range(self.world_size)]
        self.procs = [_Remote() for _ in range(self.world_size)]

    def kill(self) -> None:
        try:
            self._order("kill", time.monotonic() + 60)
        except (OSError, EOFError, RuntimeError):
            pass
        for c in self.conns:
            c.close()
        self.procs, self.conns = [], []


def _accept(listener: Listener, n: int, out: list[Connection]) -> None:
    try:
        while len(out) < n:
            out.append(listener.accept())
    except OSError:  # the listener was closed: startup gave up
        pass


def run_head(shard: Shard, port: int, nodes: int, authkey: bytes, host: str | None = None) -> int:
    """Node 0: listen for the agents on `port`, run this node's agent in a thread, run the shard
    on a ClusterPool; returns how many results it appended to the shard's part file."""
    from mgbench.validation.executors.runner import run_shard

    host = host or socket.gethostname()
    ctrl = Listener(("", port), authkey=authkey)
    local = threading.Thread(
        target=serve_agent, daemon=True, args=((host, port), authkey, node_ranks(0, shard.world_size, nodes))
    )
    local.start()
    agents = [ctrl.accept() for _ in range(nodes)]
    for a in agents:
        a.recv()  # the agent's rank list
    ctrl.close()

    def factory(world_size: int, backend: str, pg_timeout_s: float = 300.0, **kw: Any) -> ClusterPool:
        return ClusterPool(world_size, backend, agents, host, authkey, pg_timeout_s=pg_timeout_s, **kw)

    try:
        return run_shard(shard, pool_factory=factory, quiet=False)
    finally:
        for a in agents:
            try:
                a.send({"op": "stop"})
            except OSError:
                pass
            a.close()
        local.join(timeout=30)


def run_node(shard: Shard, node: int, nodes: int, head: str, port: int, authkey: bytes) -> int:
    """One node's part of a wide shard: the head on node 0, an agent elsewhere."""
    if node == 0:
        return run_head(shard, port, nodes, authkey, head)
    serve_agent((head, port), authkey, node_ranks(node, shard.world_size, nodes))
    return 0


def main() -> int:
    spec = json.loads(sys.stdin.read())
    n = run_node(
        Shard(**spec["shard"]), spec["node"], spec["nodes"], spec["head"], spec["port"], bytes.fromhex(spec["authkey"])
    )
    print(f"node {spec['node']}/{spec['nodes']}: {n} result(s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
