"""Point-to-point schedules of the pipeline references complete under NCCL's semantics.

NCCL runs one rank's operations in stream order, and a send finishes only once the peer's matching
receive runs (no buffering assumed; large messages behave so). Each rank's sequence of operation
groups (batch_isend_irecv = one group; send/recv/isend = one each) is recorded by running the
reference against a recording stand-in for torch.distributed, then simulated: a group runs when the
previous one of its rank finished, and the k-th send r->p pairs with the k-th receive p<-r while
both their groups run. gloo buffers sends, so the CPU suite cannot show such a deadlock; this can.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ["pp_chain", "pp_gpipe", "pp_gpipe_loss", "pp_interleaved"]
COLLECTIVES = {
    "broadcast",
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "all_to_all_single",
    "barrier",
}


class _Recorder:
    """The parts of torch.distributed a pipeline reference calls, recording one rank's op groups."""

    def __init__(self, rank: int, world: int):
        self.rank, self.world, self.groups = rank, world, []

    class P2POp:
        def __init__(self, op, tensor, peer, group=None, tag=0):
            self.op, self.peer = op, peer

    class _Req:
        def wait(self):
            return None

    def get_rank(self):
        return self.rank

    def get_world_size(self):
        return self.world

    def batch_isend_irecv(self, ops):
        self.groups.append([(o.op.__name__.removeprefix("i"), o.peer) for o in ops])
        return [self._Req()]

    def send(self, t, dst):
        self.groups.append([("send", dst)])

    def recv(self, t, src):
        self.groups.append([("recv", src)])

    def isend(self, t, dst):
        self.send(t, dst)
        return self._Req()

    def __getattr__(self, name):
        if name not in COLLECTIVES:
            raise AttributeError(name)

        def collective(*args, **kwargs):  # every rank's next collective, in order
            self.groups.append([("coll", -1)])
            return self._Req()

        return collective

    def irecv(self, t, src):
        self.recv(t, src)
        return self._Req()


def completes(programs: list[list[list[tuple[str, int]]]]) -> bool:
    """Whether every rank's groups finish under in-order, rendezvous point-to-point semantics."""
    pos = [0] * len(programs)
    ops = [[[(op, peer, False) for op, peer in g] for g in prog] for prog in programs]
    seen: dict[tuple, int] = {}  # (kind, rank, peer) -> ops counted so far
    index = [[[0] * len(g) for g in prog] for prog in programs]
    for r, prog in enumerate(programs):  # FIFO index of every op per (src, dst) direction
        for gi, g in enumerate(prog):
            for oi, (op, peer) in enumerate(g):
                key = (op, r, peer)
                index[r][gi][oi] = seen.get(key, 0)
                seen[key] = index[r][gi][oi] + 1
    progress = True
    while progress:
        progress = False
        for r in range(len(programs)):
            if pos[r] == len(programs[r]):
                continue
            g = ops[r][pos[r]]
            for oi, (op, peer, done) in enumerate(g):
                if op == "coll" and not done:
                    progress |= _collective(ops, index, pos, r, oi)
                    continue
                if done or pos[peer] == len(programs[peer]):
                    continue
                want = ("recv" if op == "send" else "send", peer, r)
                for pj, (pop, ppeer, pdone) in enumerate(ops[peer][pos[peer]]):
                    if (pop, peer, ppeer) == want and not pdone and index[peer][pos[peer]][pj] == index[r][pos[r]][oi]:
                        g[oi] = (op, peer, True)
                        ops[peer][pos[peer]][pj] = (pop, ppeer, True)
                        progress = True
                        break
            for rr in range(len(programs)):
                while pos[rr] < len(programs[rr]) and all(d for _, _, d in ops[rr][pos[rr]]):
                    pos[rr] += 1
                    progress = True
    return all(p == len(prog) for p, prog in zip(pos, programs))


def _collective(ops: list, index: list, pos: list[int], r: int, oi: int) -> bool:
    """Complete collective `oi` of rank r's running group if every rank runs the same-numbered one."""
    want, hits = index[r][pos[r]][oi], []
    for rr in range(len(ops)):
        if pos[rr] == len(ops[rr]):
            return False
        hit = [
            j
            for j, (op, _, d) in enumerate(ops[rr][pos[rr]])
            if op == "coll" and not d and index[rr][pos[rr]][j] == want
        ]
        if not hit:
            return False
        hits.append((rr, hit[0]))
    for rr, j in hits:
        ops[rr][pos[rr]][j] = ("coll", -1, True)
    return True


def _programs(path: Path, world: int, micro: int | None = None) -> list[list[list[tuple[str, int]]]]:
    out = []
    for rank in range(world):
        spec = importlib.util.spec_from_file_location(f"sched_{rank}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mod.SIZES["sched"] = {**mod.SIZES["smoke"], **({"micro": micro} if micro else {})}
        rec = _Recorder(rank, world)
        mod.dist = rec
        mod.solution(*mod.make_inputs(rank, world, seed=0, device="cpu", size="sched"))
        out.append(rec.groups)
    return out


@pytest.fixture(scope="module")
def tasks(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sched")
    fams = [*PIPELINE, "ring_shift", "ring_attention", "halo_conv1d", "halo_conv2d"]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "mgbench.cli",
            "generate",
            "--out",
            str(out),
            *[a for f in fams for a in ("--family", f)],
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return out / "tasks"


def test_simulator_catches_a_send_first_ring():
    """Both ranks send before receiving: a deadlock without buffering."""
    assert not completes([[[("send", 1)], [("recv", 1)]], [[("send", 0)], [("recv", 0)]]])
    assert completes([[[("send", 1), ("recv", 1)]], [[("send", 0), ("recv", 0)]]])


@pytest.mark.parametrize("world,micro", [(2, 4), (2, 8), (4, 4), (4, 8), (8, 4), (8, 8)])
def test_pipeline_schedules_complete(tasks: Path, world: int, micro: int):
    paths = sorted(tasks.glob("l*-pp_*-fp32.py"))
    assert len(paths) == len(PIPELINE)
    for path in paths:
        assert completes(_programs(path, world, micro)), f"{path.name}: deadlock at world {world}, micro {micro}"


@pytest.mark.parametrize("world", [2, 4, 8])
def test_ring_and_halo_schedules_complete(tasks: Path, world: int):
    paths = [p for p in sorted(tasks.glob("*.py")) if "-pp_" not in p.name and "fp32" in p.name]
    assert len(paths) >= 4
    for path in paths:
        assert completes(_programs(path, world)), f"{path.name}: deadlock at world {world}"
