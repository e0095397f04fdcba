"""Waiting for the work a call keeps (search.drained, standin_drain.py), without running ranks."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from mgbench.scrapers.harness.inputs.search import drained
from mgbench.scrapers.harness.make.runtime_parts import part_text, runtime_source

ASYNC = "def f(out, x):\n    return dist.all_gather_into_tensor(out, x, async_op=True)\n"


@pytest.mark.parametrize(
    "outcome", ["nondeterministic", "output_overwritten_by_later_calls", "timeout", "crashed: rank 1 died"]
)
def test_drain_is_tried_once_after_unfinished_outcomes_in_async_code(outcome):
    spec = {"args": [], "attrs": [], "globals": []}
    assert drained(spec, {"_text": ASYNC}, outcome) == [{**spec, "drain": True}]
    assert drained({**spec, "drain": True}, {"_text": ASYNC}, outcome) == []
    assert drained(spec, {"_text": ASYNC.replace("async_op=True", "")}, outcome) == []
    assert drained(spec, {"_text": "dist.irecv(buf, src=0)"}, outcome)
    assert drained(spec, {"_text": "dist.all_reduce(x, async_op=self.async_op)"}, outcome)
    assert drained(spec, {"_text": "dist.all_reduce(x, async_op=False)"}, outcome) == []
    assert drained(spec, {"_text": ASYNC}, "input_insensitive") == []


ENTRY = """
import torch.distributed as dist

HANDLES = []


def gather_later(out, x):
    HANDLES.append(dist.all_gather_into_tensor(out, x, async_op=True))   # waited for by a later call
    return out
"""


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
    exec(runtime_source() + ("\n" + part_text("standin_drain.py") if drain else ""), ns)
    exec(ENTRY, ns)
    spec = {
        "entry": "gather_later",
        "kind": "function",
        "attrs": [],
        "n_attr": 8,
        "drain": drain,
        "args": [
            {"name": "out", "kind": "tensor", "shape": ["n"], "dtype": "float32"},
            {"name": "x", "kind": "tensor", "shape": ["n"], "dtype": "float32"},
        ],
    }
    out = ns["_mg_call"](ns, spec, ns["_mg_inputs"](spec, 0, 1, 0, "cpu", 8))
    assert isinstance(out, torch.Tensor) and len(started) == 1
    assert started[0].waited is drain
    assert dist.all_gather_into_tensor is late_gather  # the recording wrapper is gone after the call


COALESCED = """
import torch.distributed as dist


def reduce_coalesced(x, y):
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_reduce(x, async_op=True)
        dist.all_reduce(y, async_op=True)
    cm.wait()
    return x + y
"""


def test_drain_skips_the_placeholder_work_of_ops_inside_a_coalescing_manager(one_rank):
    """Inside `_coalescing_manager` an async op returns `_IllegalWork`, whose `wait()` raises: not kept."""
    ns: dict = {}
    exec(runtime_source() + "\n" + part_text("standin_drain.py"), ns)
    exec(COALESCED, ns)
    t = {"kind": "tensor", "shape": ["n"], "dtype": "float32"}
    spec = {
        "entry": "reduce_coalesced",
        "kind": "function",
        "attrs": [],
        "n_attr": 8,
        "drain": True,
        "args": [{"name": "x", **t}, {"name": "y", **t}],
    }
    out = ns["_mg_call"](ns, spec, ns["_mg_inputs"](spec, 0, 1, 0, "cpu", 8))
    assert isinstance(out, torch.Tensor) and out.shape == (8,)
