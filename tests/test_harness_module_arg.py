"""Harness rules: a `model.parameters()` argument becomes a synthesized model; function-local imports
get the same stand-ins as module-level ones."""
from __future__ import annotations

from scrapers.harness.mutate import propose
from scrapers.harness.render import prepare
from scrapers.harness.search import Budget, synthesize

AVG = """import torch
import torch.distributed as dist


def avg_params(module, group):
    ws = dist.get_world_size(group)
    for p in module.parameters():
        dist.all_reduce(p.data, group=group)
        p.data /= ws
"""
CHECK = """import torch
import torch.distributed as dist


def check_same(model, group):
    for p in model.parameters():
        ref = p.detach().clone()
        dist.broadcast(ref, 0, group=group)
"""
LOCAL = """import torch.distributed as dist


def grad_sync(model):
    from megatron.core import mpu
    for p in model.parameters():
        dist.all_reduce(p.grad, group=mpu.get_data_parallel_group())
"""


def _cand(name: str, params: list[str]) -> dict:
    return {"id": "c0", "qualname": name, "entry": name, "kind": "function", "role": "library",
            "provenance": {"repo": "x/y", "path": "a.py", "commit": "0" * 40, "line_start": 1, "line_end": 9,
                           "license": "MIT", "url": "u"}, "docstring": None,
            "params": [{"name": p, "kind": "positional", "annotation": None, "default": None} for p in params]}


def test_parameters_call_proposes_a_model_argument():
    spec = {"entry": "f", "kind": "function", "attrs": [], "n_attr": 8,
            "args": [{"name": "model", "kind": "tensor", "shape": ["n"], "dtype": "float32"}]}
    err = {"type": "AttributeError", "msg": "'Tensor' object has no attribute 'parameters'",
           "line": "for p in model.parameters():"}
    first = propose(spec, err, _cand("f", ["model"]))[0]
    assert first["args"][0]["kind"] == "module"


def test_function_local_import_gets_the_parallel_state_stand_in():
    body = prepare(LOCAL).body
    assert "mpu = _MgParallelState()" in body and "from megatron" not in body


def test_model_argument_harness_is_accepted():
    fast = Budget(seconds=30, attempts=8, attempt_timeout_s=6, mem_mb=512)
    for text, name, params in ((AVG, "avg_params", ["module", "group"]), (LOCAL, "grad_sync", ["model"])):
        res = synthesize(_cand(name, params), text, fast)
        assert res.accepted, res
        assert any(a["kind"] == "module" for a in res.spec["args"])


def test_model_argument_returned_unchanged_is_an_echo():
    res = synthesize(_cand("check_same", ["model", "group"]), CHECK,
                     Budget(seconds=20, attempts=4, attempt_timeout_s=6, mem_mb=512))
    assert not res.accepted and res.reason == "degenerate_copy_of_inputs"
