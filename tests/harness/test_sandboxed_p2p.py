"""End-to-end: point-to-point exchanges with peer ranks, and draining the work a call keeps."""

from __future__ import annotations

import pytest

from mgbench.scrapers.harness.inputs.peerfix import NEXT, PREV
from mgbench.scrapers.harness.inputs.search import Budget, synthesize
from tests.harness.helpers import entry_candidate

pytestmark = pytest.mark.sandboxed  # runs candidates or tasks through child rank processes


P2P = """import torch
import torch.distributed as dist


def exchange(send_next, recv_prev, group, next_rank, prev_rank):
    ops = [dist.P2POp(dist.isend, send_next, next_rank, group), dist.P2POp(dist.irecv, recv_prev, prev_rank, group)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    return recv_prev * 2
"""


def test_ring_exchange_is_synthesized_with_peer_ranks():
    """Ranks guessed as 0 make every rank send to itself; after gloo's error they become the ring's peers."""
    cand, text = entry_candidate(P2P, "exchange", params=["send_next", "recv_prev", "group", "next_rank", "prev_rank"])
    res = synthesize(cand, text, Budget(seconds=40, attempts=12, attempt_timeout_s=6, mem_mb=512))
    assert res.accepted, (res.reason, res.last_error)
    exprs = {a["name"]: a.get("expr") for a in res.spec["args"]}
    assert exprs["next_rank"] == NEXT and exprs["prev_rank"] == PREV and 4 in res.world_sizes


RING = """
import torch.distributed as dist


def exchange_later(send_next, recv_prev, next_rank, prev_rank):
    ops = [dist.P2POp(dist.isend, send_next, next_rank), dist.P2POp(dist.irecv, recv_prev, prev_rank)]
    dist.batch_isend_irecv(ops)          # the requests are never waited for here
    return recv_prev
"""


def _ring_under_drain(text: str):
    """`exchange_later` of `text` run on 2 gloo ranks with "drain", ring peers as its ranks."""
    from mgbench.scrapers.harness.inputs.peerfix import NEXT, PREV
    from mgbench.scrapers.harness.make.render import prepare, task_source
    from mgbench.scrapers.harness.run.sandbox import run_ranks
    from tests.harness.helpers import entry_candidate

    cand, text = entry_candidate(text, "exchange_later", params=["send_next", "recv_prev", "next_rank", "prev_rank"])
    t = {"kind": "tensor", "shape": ["n"], "dtype": "float32", "replicated": False}
    spec = {
        "entry": "exchange_later",
        "kind": "function",
        "attrs": [],
        "n_attr": 8,
        "drain": True,
        "args": [
            {"name": "send_next", **t},
            {"name": "recv_prev", **t},
            {"name": "next_rank", "kind": "int", "expr": NEXT},
            {"name": "prev_rank", "kind": "int", "expr": PREV},
        ],
    }
    return run_ranks(task_source(cand, prepare(text), spec), 2, 8, timeout_s=8)


def test_drain_keeps_p2p_op_identity_checks_and_delivers_the_ring_exchange():
    """`P2POp` and `batch_isend_irecv` compare `op` with `isend` by identity: the recording wrapper must be
    the same object in `torch.distributed` and `distributed_c10d`. Under drain the exchange completes and
    each rank outputs what its previous peer sent (seen through the per-rank fingerprints)."""
    at = _ring_under_drain(RING)
    assert at.status == "ok", (at.status, at.reason, at.error())
    outs = [r["out"]["hash"] for r in at.replies]
    ins = [r["again"]["hash"] for r in at.replies]
    assert outs == ins and outs[0] != outs[1]  # deterministic, and each rank got its peer's data


WAITED = RING.replace(
    "    dist.batch_isend_irecv(ops)          # the requests are never waited for here",
    "    for req in dist.batch_isend_irecv(ops):\n        req.wait()",
)


def test_drain_does_not_wait_again_for_work_the_call_waited_for():
    """A gloo send's second `wait()` waits for another send (until the timeout): work the candidate already
    waited for is not waited for again."""
    assert "req.wait()" in WAITED
    at = _ring_under_drain(WAITED)
    assert at.status == "ok", (at.status, at.reason, at.error())
