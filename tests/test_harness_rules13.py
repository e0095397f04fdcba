"""Harness rules of session 13: a world-size `__init__` parameter takes the run's world size over its literal
default; "drain" waits for the communication a call leaves running (standin_drain.py); an error naming the
type it got (`'NoneType' object has no attribute 'shape'`) blames the argument of that type."""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from scrapers.harness.initattrs import init_attrs
from scrapers.harness.mutate import propose
from scrapers.harness.render import _below_marker, runtime_source
from scrapers.harness.search import drained

TP_MLP = '''
class TP_MLP:
    def __init__(self, rank=0, world_size=8, group=None, hidden=4, tp_size: int = 2, pp_size=1):
        self.rank = rank
        self.world_size = world_size
        self.tp = tp_size
        self.pp = pp_size
        self.hidden = hidden
        self.group = group
'''


def test_world_size_defaults_become_the_runs_world_size_other_literals_stay():
    got = init_attrs(TP_MLP, "TP_MLP")
    assert got["world_size"] == {"name": "world_size", "kind": "int", "expr": "ws"}
    assert got["tp"]["expr"] == "ws"
    assert got["pp"] == {"name": "pp", "kind": "const", "value": 1}      # a parallel size of 1: none, not ws
    assert got["hidden"] == {"name": "hidden", "kind": "const", "value": 4}
    assert got["rank"] == {"name": "rank", "kind": "const", "value": 0}     # a rank keeps its default
    assert got["group"]["kind"] == "group"


PLAIN = {"kind": "function", "entry": "f", "params": [], "_text": "", "_defined": set(), "_init": {}}


def _spec_with(*attrs: dict) -> dict:
    return {"entry": "TP_MLP.torch_gemm_rs", "kind": "method", "args": [], "globals": [], "attrs": list(attrs)}


def test_an_error_naming_nonetype_blames_the_none_not_the_int_on_the_line():
    ws = {"name": "world_size", "kind": "int", "expr": "ws"}
    proj = {"name": "down_proj", "kind": "const", "value": None}
    spec = _spec_with(ws, proj)
    err = {"type": "AttributeError", "msg": "'NoneType' object has no attribute 'shape'", "in_candidate": True,
           "line": "self.rs_buffer = torch.empty([M // self.world_size, self.down_proj.shape[0]], dtype=x.dtype)"}
    changed = [{a["name"] for a in s["attrs"] if a not in (ws, proj)} for s in propose(spec, err, PLAIN)]
    assert changed and all(c == {"down_proj"} for c in changed if c)
    # with no argument of that type on the line, every suspect is still tried
    spec2 = _spec_with(ws, {"name": "down_proj", "kind": "int", "expr": "n"})
    assert any({a["name"] for a in s["attrs"] if a["kind"] == "tensor"} == {"world_size"}
               for s in propose(spec2, err, PLAIN))


ASYNC = "def f(out, x):\n    return dist.all_gather_into_tensor(out, x, async_op=True)\n"


@pytest.mark.parametrize("outcome", ["nondeterministic", "output_overwritten_by_later_calls", "timeout",
                                     "crashed: rank 1 died"])
def test_drain_is_tried_once_after_unfinished_outcomes_in_async_code(outcome):
    spec = {"args": [], "attrs": [], "globals": []}
    assert drained(spec, {"_text": ASYNC}, outcome) == [{**spec, "drain": True}]
    assert drained({**spec, "drain": True}, {"_text": ASYNC}, outcome) == []
    assert drained(spec, {"_text": ASYNC.replace("async_op=True", "")}, outcome) == []
    assert drained(spec, {"_text": "dist.irecv(buf, src=0)"}, outcome)
    assert drained(spec, {"_text": "dist.all_reduce(x, async_op=self.async_op)"}, outcome)
    assert drained(spec, {"_text": "dist.all_reduce(x, async_op=False)"}, outcome) == []
    assert drained(spec, {"_text": ASYNC}, "input_insensitive") == []


ENTRY = '''
import torch.distributed as dist

HANDLES = []


def gather_later(out, x):
    HANDLES.append(dist.all_gather_into_tensor(out, x, async_op=True))   # waited for by a later call
    return out
'''


class _LateWork(dist.Work):
    def __init__(self) -> None:
        super().__init__()
        self.waited = False

    def wait(self, timeout=None) -> bool:
        self.waited = True
        return True


@pytest.mark.parametrize("drain", [False, True])
def test_drain_waits_for_the_work_a_call_keeps(one_rank, monkeypatch, drain):
    """The entry keeps its handle for later: with "drain" the harness waits for it before the outputs are
    read (also through a name imported from torch.distributed), without it nobody does."""
    started: list[_LateWork] = []

    def late_gather(out, x, group=None, async_op=False):
        started.append(_LateWork())
        return started[-1]
    monkeypatch.setattr(dist, "all_gather_into_tensor", late_gather)
    ns: dict = {}
    exec(runtime_source() + ("\n" + _below_marker("standin_drain.py") if drain else ""), ns)
    exec(ENTRY, ns)
    spec = {"entry": "gather_later", "kind": "function", "attrs": [], "n_attr": 8, "drain": drain,
            "args": [{"name": "out", "kind": "tensor", "shape": ["n"], "dtype": "float32"},
                     {"name": "x", "kind": "tensor", "shape": ["n"], "dtype": "float32"}]}
    out = ns["_mg_call"](ns, spec, ns["_mg_inputs"](spec, 0, 1, 0, "cpu", 8))
    assert isinstance(out, torch.Tensor) and len(started) == 1
    assert started[0].waited is drain
    assert dist.all_gather_into_tensor is late_gather           # the recording wrapper is gone after the call


def test_a_transposed_none_becomes_a_matrix():
    proj = {"name": "gate_up_proj", "kind": "const", "value": None}
    err = {"type": "AttributeError", "msg": "'NoneType' object has no attribute 'T'", "in_candidate": True,
           "line": "return torch.matmul(ag_buffer, self.gate_up_proj.T)"}
    first = propose(_spec_with(proj), err, PLAIN)[0]
    assert first["attrs"][0]["kind"] == "tensor" and first["attrs"][0]["shape"] == ["n", "n"]


RING = '''
import torch.distributed as dist


def exchange_later(send_next, recv_prev, next_rank, prev_rank):
    ops = [dist.P2POp(dist.isend, send_next, next_rank), dist.P2POp(dist.irecv, recv_prev, prev_rank)]
    dist.batch_isend_irecv(ops)          # the requests are never waited for here
    return recv_prev
'''


def _ring_under_drain(text: str):
    """`exchange_later` of `text` run on 2 gloo ranks with "drain", ring peers as its ranks."""
    from scrapers.harness.peers import NEXT, PREV
    from scrapers.harness.render import prepare, task_source
    from scrapers.harness.sandbox import run_ranks
    from tests.harness_cases import entry_candidate
    cand, text = entry_candidate(text, "exchange_later", params=["send_next", "recv_prev", "next_rank", "prev_rank"])
    t = {"kind": "tensor", "shape": ["n"], "dtype": "float32", "replicated": False}
    spec = {"entry": "exchange_later", "kind": "function", "attrs": [], "n_attr": 8, "drain": True,
            "args": [{"name": "send_next", **t}, {"name": "recv_prev", **t},
                     {"name": "next_rank", "kind": "int", "expr": NEXT},
                     {"name": "prev_rank", "kind": "int", "expr": PREV}]}
    return run_ranks(task_source(cand, prepare(text), spec), 2, 8, timeout_s=8)


def test_drain_keeps_p2p_op_identity_checks_and_delivers_the_ring_exchange():
    """`P2POp` and `batch_isend_irecv` compare `op` with `isend` by identity: the recording wrapper must be
    the same object in `torch.distributed` and `distributed_c10d`. Under drain the exchange completes and
    each rank outputs what its previous peer sent (seen through the per-rank fingerprints)."""
    at = _ring_under_drain(RING)
    assert at.status == "ok", (at.status, at.reason, at.error())
    outs = [r["out"]["hash"] for r in at.replies]
    ins = [r["again"]["hash"] for r in at.replies]
    assert outs == ins and outs[0] != outs[1]          # deterministic, and each rank got its peer's data


WAITED = RING.replace("    dist.batch_isend_irecv(ops)          # the requests are never waited for here",
                      "    for req in dist.batch_isend_irecv(ops):\n        req.wait()")


def test_drain_does_not_wait_again_for_work_the_call_waited_for():
    """A gloo send's second `wait()` waits for another send (until the timeout): work the candidate already
    waited for is not waited for again."""
    assert "req.wait()" in WAITED
    at = _ring_under_drain(WAITED)
    assert at.status == "ok", (at.status, at.reason, at.error())


COALESCED = '''
import torch.distributed as dist


def reduce_coalesced(x, y):
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_reduce(x, async_op=True)
        dist.all_reduce(y, async_op=True)
    cm.wait()
    return x + y
'''


def test_drain_skips_the_placeholder_work_of_ops_inside_a_coalescing_manager(one_rank):
    """Inside `_coalescing_manager` an async op returns `_IllegalWork`, whose `wait()` raises: not kept."""
    ns: dict = {}
    exec(runtime_source() + "\n" + _below_marker("standin_drain.py"), ns)
    exec(COALESCED, ns)
    t = {"kind": "tensor", "shape": ["n"], "dtype": "float32"}
    spec = {"entry": "reduce_coalesced", "kind": "function", "attrs": [], "n_attr": 8, "drain": True,
            "args": [{"name": "x", **t}, {"name": "y", **t}]}
    out = ns["_mg_call"](ns, spec, ns["_mg_inputs"](spec, 0, 1, 0, "cpu", 8))
    assert isinstance(out, torch.Tensor) and out.shape == (8,)
