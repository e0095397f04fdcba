"""The settled call of the task-side runtime (`_mg_call_settled`): for a spec whose output mode and changed
inputs were decided once (scrapers/harness/run/settle.py), the output equals the auto path's, with no
comparison (no aten.equal, no host sync) and no clone of an input the entry does not change."""

from __future__ import annotations

import textwrap

import pytest
import torch

from mgbench.scrapers.harness.make.render import runtime_source
from mgbench.scrapers.harness.run.settle import _merge
from mgbench.scrapers.level4.tracer import TraceMode

CODE = textwrap.dedent("""
    import torch
    import torch.distributed as dist

    def reduce_inplace(grad, scale):
        dist.all_reduce(grad)
        grad.mul_(scale)

    def reduce_value(x, w):
        y = x @ w
        dist.all_reduce(y)
        return y

    def mean_loss(x):
        loss = (x * x).sum()
        dist.all_reduce(loss)
        return loss.item()

    def clip_grads(grads, max_norm):
        norm = torch.stack([g.pow(2).sum() for g in grads]).sum()
        dist.all_reduce(norm)
        for g in grads:
            g.mul_(max_norm / (norm.sqrt() + 1e-6))
        return norm

    def clip_params(params, max_norm):
        norm = torch.stack([p.grad.pow(2).sum() for p in params]).sum()
        dist.all_reduce(norm)
        for p in params:
            p.grad.mul_(max_norm / (norm.sqrt() + 1e-6))
        return norm + torch.stack([p.detach().sum() for p in params]).sum()

    class Buffer:
        def step(self, x):
            self.acc.add_(x)
            dist.all_reduce(self.acc)
""")


def _ns() -> dict:
    ns: dict = {}
    exec(runtime_source() + "\n" + CODE, ns)
    return ns


def _t(shape=("n",)) -> dict:
    return {"name": "x", "kind": "tensor", "shape": list(shape), "dtype": "float32"}


SPECS = {
    "inplace": {
        "entry": "reduce_inplace",
        "kind": "function",
        "n_attr": 8,
        "args": [{**_t(), "name": "grad"}, {"name": "scale", "kind": "float", "value": 0.5}],
    },
    "value": {
        "entry": "reduce_value",
        "kind": "function",
        "n_attr": 8,
        "args": [_t(("n", "n")), {**_t(("n", "n")), "name": "w", "replicated": True}],
    },
    "numbers": {"entry": "mean_loss", "kind": "function", "n_attr": 8, "args": [_t()]},
    "scratch": {
        "entry": "clip_grads",
        "kind": "function",
        "n_attr": 8,
        "args": [{**_t(), "kind": "tensors", "count": "3"}, {"name": "max_norm", "kind": "float", "value": 0.5}],
    },
    "state": {
        "entry": "Buffer.step",
        "kind": "method",
        "n_attr": 8,
        "state": True,
        "args": [_t()],
        "attrs": [{**_t(), "name": "acc"}],
    },
}
MODES = {"inplace": "args", "value": "return", "numbers": "numbers", "state": "state", "scratch": "return"}


def _settle(ns: dict, spec: dict) -> dict:
    """The keys settle.py merges from the report of one rank's auto call."""
    ns["_MG_REPORT"] = {}
    ns["_mg_call"](ns, spec, ns["_mg_inputs"](spec, 0, 1, 0, "cpu", 8))
    rep, ns["_MG_REPORT"] = {k: v for k, v in ns["_MG_REPORT"].items() if not k.startswith("_")}, None
    return {**spec, **_merge([rep], spec)}


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


@pytest.mark.parametrize("case", sorted(SPECS))
def test_settled_call_gives_the_auto_output(one_rank, case):
    ns = _ns()
    settled = _settle(ns, SPECS[case])
    assert settled["output"]["mode"] == MODES[case], settled["output"]
    for seed in (0, 1):
        inputs = ns["_mg_inputs"](SPECS[case], 0, 1, seed, "cpu", 8)
        kept = [v.clone() if isinstance(v, torch.Tensor) else v for v in inputs]
        want = ns["_mg_call"](ns, SPECS[case], inputs)
        for _ in range(2):  # twice: a reused draw or an uncloned input would change the second call
            assert _same(ns["_mg_call"](ns, settled, inputs), want)
        assert all(_same(a, b) for a, b in zip(inputs, kept)), "the settled call changed its inputs"


def test_settle_report_names_what_the_entry_changes(one_rank):
    ns = _ns()
    inplace, value = _settle(ns, SPECS["inplace"]), _settle(ns, SPECS["value"])
    assert inplace["output"] == {"mode": "args", "index": [0]} and inplace["mutates"] == [0]
    assert value["mutates"] == [] and value["returns"] == []
    assert _settle(ns, SPECS["state"])["mutates"] == [1]  # the state attribute `acc` is input 1


@pytest.mark.parametrize("case", sorted(SPECS))
def test_settled_call_compares_nothing_and_clones_only_changed_inputs(one_rank, case):
    ns = _ns()
    settled = _settle(ns, SPECS[case])
    inputs = ns["_mg_inputs"](settled, 0, 1, 0, "cpu", 8)
    ns["_mg_call"](ns, settled, inputs)  # the first call draws the attributes once
    with TraceMode() as auto_mode:
        ns["_mg_call"](ns, SPECS[case], inputs)
    with TraceMode() as mode:
        ns["_mg_call"](ns, settled, inputs)
    harness = mode.trace.harness_ops
    assert "aten.equal" not in harness and "aten.equal" not in mode.trace.ops, harness
    assert mode.trace.ops == auto_mode.trace.ops  # the mined code's own work is unchanged
    reused = {int(i) for i in settled["scratch"]}
    cloned = len((set(settled["mutates"]) | set(settled["returns"])) - reused)
    assert harness.get("aten.clone", 0) == cloned, (harness, settled)
    assert harness.get("aten.copy_", 0) == sum(map(len, settled["scratch"].values())), (harness, settled)
    if case == "scratch":  # the grads, changed and no part of the output: one copy kept, refilled
        assert settled["scratch"] == {"0": [0, 1, 2]} and "aten.clone" not in harness
    if case == "inplace":
        assert "aten.equal" in auto_mode.trace.harness_ops  # the auto path compares the argument afterwards
    if case == "value":
        assert auto_mode.trace.harness_ops["aten.clone"] == 2 and "aten.clone" not in harness


def test_settled_call_draws_attributes_once(one_rank):
    ns = _ns()
    ns["Scaled"] = type("Scaled", (), {"go": lambda self, x: (x * self.w, torch.distributed.all_reduce(x))[0]})
    spec = {
        "entry": "Scaled.go",
        "kind": "method",
        "n_attr": 8,
        "args": [_t()],
        "attrs": [{**_t(), "name": "w"}],
    }
    settled = _settle(ns, spec)
    assert settled["mutates_attrs"] == []
    inputs = ns["_mg_inputs"](spec, 0, 1, 0, "cpu", 8)
    ns["_mg_call"](ns, settled, inputs)
    with TraceMode() as auto_mode:
        want = ns["_mg_call"](ns, spec, inputs)
    with TraceMode() as mode:
        out = ns["_mg_call"](ns, settled, inputs)
    assert auto_mode.trace.harness_ops.get("aten.randn") == 1  # the auto path draws `w` in every call
    assert "aten.randn" not in mode.trace.harness_ops and _same(out, want)
    assert mode.trace.ops == auto_mode.trace.ops  # draws are harness work, not the mined code's


def test_reused_copy_follows_an_input_the_caller_changed(one_rank):
    """The kept copy of a changed input (spec "scratch") is refilled only where the entry writes (here the
    gradients); an input the caller changed in place since (a weight, which the entry only reads) gets a
    fresh copy."""
    ns = _ns()
    spec = {
        "entry": "clip_params",
        "kind": "function",
        "n_attr": 8,
        "args": [{**_t(), "kind": "tensors", "count": "2", "grads": True}, {"name": "m", "kind": "float"}],
    }
    settled = _settle(ns, spec)
    assert settled["scratch"] == {"0": [1, 3]}, settled  # weights 0 and 2 are only read
    inputs = ns["_mg_inputs"](spec, 0, 1, 0, "cpu", 8)
    ns["_mg_call"](ns, settled, inputs)
    with torch.no_grad():
        inputs[0][0].mul_(3.0)  # the caller scales a weight between calls
    assert _same(ns["_mg_call"](ns, settled, inputs), ns["_mg_call"](ns, spec, inputs))
