"""End-to-end: methods on object state, wrapped models, module subclasses, abstract classes, flags and model
arguments are synthesized and accepted."""

from __future__ import annotations

import pytest

from mgbench.scrapers.harness.inputs.search import Budget, synthesize
from mgbench.scrapers.harness.make.render import runtime_source
from tests.harness.helpers import (
    FAST_8_NO_WS4,
    FAST_14,
    FAST_14_NO_WS4,
    LOCAL,
    ROW_LINEAR,
    _cand,
    _method,
    entry_candidate,
)

pytestmark = pytest.mark.sandboxed  # runs candidates or tasks through child rank processes


def test_row_parallel_forward_is_accepted_from_init_state():
    """Without `__init__` state the search spends a run per attribute and guesses `weight` 1-d; with it the
    first missing attribute brings them all, and the weight (drawn at a fixed size) becomes an input so the
    harness scales."""
    res = synthesize(*entry_candidate(ROW_LINEAR, "RowLinear.forward", "method", ["self", "x"]), FAST_8_NO_WS4, print)
    assert res.accepted, (res.reason, res.last_error)
    names = {a["name"]: a for a in res.spec["attrs"]}
    assert names["weight"]["shape"] == ["n", "n"] and names["mode"]["value"] == "sum"
    assert res.spec["state"] is True and res.attempts <= 4


AVG = """import torch
import torch.distributed as dist


def avg_params(module, group):
    ws = dist.get_world_size(group)
    for p in module.parameters():
        dist.all_reduce(p.data, group=group)
        p.data /= ws
"""


def test_model_argument_harness_is_accepted():
    fast = Budget(seconds=30, attempts=8, attempt_timeout_s=6, mem_mb=512)
    for text, name, params in ((AVG, "avg_params", ["module", "group"]), (LOCAL, "grad_sync", ["model"])):
        res = synthesize(_cand(name, params), text, fast)
        assert res.accepted, res
        assert any(a["kind"] == "module" for a in res.spec["args"])


BUCKET = """import torch
import torch.distributed as dist


class GradBucket:
    def sync(self):
        dist.all_reduce(self.grad_data)
        self.grad_data /= dist.get_world_size()
        self.synced = self.grad_data.sum()
"""


def test_method_on_object_state_takes_its_tensor_attributes_as_inputs():
    """`bucket.sync()` returns nothing and takes no tensors: its output is the state it changed, and its tensor
    attributes become per-rank inputs (seeded like arguments), so the task is input-sensitive."""
    res = synthesize(*_method(BUCKET, "GradBucket.sync"), FAST_14, print)
    assert res.accepted, (res.reason, res.last_error)
    assert res.spec["state"] is True and [a["name"] for a in res.spec["attrs"]] == ["grad_data"]
    ns: dict = {}
    exec(runtime_source(), ns)
    a = ns["_mg_inputs"](res.spec, 0, 2, 0, "cpu", 8)
    b = ns["_mg_inputs"](res.spec, 1, 2, 0, "cpu", 8)
    c = ns["_mg_inputs"](res.spec, 0, 2, 1, "cpu", 8)
    assert len(a) == 1 and not a[0].equal(b[0]) and not a[0].equal(c[0])


DDP = """import torch
import torch.distributed as dist


class DataParallel:
    def broadcast_params(self):
        for param in self.module.parameters():
            dist.broadcast(param.data, src=0)
"""


def test_method_on_a_wrapped_model_takes_the_model_as_input():
    """Megatron `DistributedDataParallel.broadcast_params`: `self.module` is a model whose parameters are
    per-rank inputs, and the broadcast parameters are the output."""
    res = synthesize(*_method(DDP, "DataParallel.broadcast_params"), FAST_14)
    assert res.accepted, (res.reason, res.last_error)
    assert res.spec["state"] is True and res.spec["attrs"][0]["kind"] == "module"


WRAPPER = """import torch
import torch.distributed as dist


class ShardedWrapper(torch.nn.Module):
    def broadcast_params(self):
        group = self.dist_index.get_dp_group()
        for param in self.module.parameters():
            dist.broadcast(param.data, src=0, group=group)
"""


def test_method_of_a_module_subclass_gets_submodules_and_a_parallel_state():
    """A `torch.nn.Module` subclass built without its `__init__` still accepts a model attribute (Module's
    own machinery is initialised), `self.dist_index.get_dp_group()` is a parallel-state object, and the
    broadcast parameters of the submodule are the output."""
    res = synthesize(*_method(WRAPPER, "ShardedWrapper.broadcast_params"), FAST_14_NO_WS4)
    assert res.accepted, (res.reason, res.last_error)
    kinds = {a["name"]: (a["kind"], a.get("value")) for a in res.spec["attrs"]}
    assert kinds == {"module": ("module", None), "dist_index": ("group", "state")} and res.spec["state"] is True


ABSTRACT = """import abc
import torch
import torch.distributed as dist


class Awaitable(abc.ABC):
    @abc.abstractmethod
    def _wait_impl(self):
        ...


class AllToAllAwaitable(Awaitable):
    def start(self, x, device):
        out = torch.empty(x.shape, device=device)
        dist.all_to_all_single(out, x)
        return out
"""


def test_concrete_method_of_an_abstract_class_and_a_device_argument():
    """torchrec's awaitables: the class leaves an abstract method undefined (the harness builds it anyway);
    `device` is the rank's device, not a tensor."""
    cand, text = _method(ABSTRACT, "AllToAllAwaitable.start")
    cand["params"] += [{"name": p, "kind": "positional", "annotation": None, "default": None} for p in ("x", "device")]
    res = synthesize(cand, text, FAST_14_NO_WS4)
    assert res.accepted, (res.reason, res.last_error)
    assert [a["kind"] for a in res.spec["args"]] == ["tensor", "device"]


GATED = """import torch
import torch.distributed as dist


class Syncer:
    def sync(self, grad):
        if self.enabled:
            dist.all_reduce(grad)
        return grad
"""


def test_flags_guessed_false_are_set_when_nothing_communicates():
    """`if self.enabled:` around the collective: with the flag False the run communicates nothing; setting the
    flags guessed False opens the gate."""
    res = synthesize(*entry_candidate(GATED, "Syncer.sync", "method", ["self", "grad"]), FAST_14_NO_WS4)
    assert res.accepted, (res.reason, res.last_error)
    assert {"name": "enabled", "kind": "bool", "value": True} in res.spec["attrs"]
