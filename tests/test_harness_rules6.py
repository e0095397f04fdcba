"""Harness rules of session 6: module globals left None (`g_mpu = None`), loop variables over a list of model
chunks, and methods of `nn.Module` subclasses (whose own `__init__` the harness does not run)."""
from __future__ import annotations

from scrapers.harness.mutate import loop_aliases, propose
from scrapers.harness.search import Budget, synthesize
from tests.harness_cases import candidate
from tests.test_harness_rules5 import _method

FAST = Budget(seconds=40, attempts=14, attempt_timeout_s=6, mem_mb=512)

GLOBAL_MPU = '''import torch
import torch.distributed as dist

g_mpu = None


def _gather(input_):
    group = g_mpu.get_model_parallel_group()
    out = [torch.empty_like(input_) for _ in range(dist.get_world_size(group=group))]
    dist.all_gather(out, input_, group=group)
    return torch.cat(out)
'''

CHUNKS = '''import torch
import torch.distributed as dist


def calc_norm(model):
    if not isinstance(model, list):
        model = [model]
    total = torch.zeros(1)
    for model_chunk in model:
        for param in model_chunk.parameters():
            total += param.detach().float().pow(2).sum()
    dist.all_reduce(total)
    return total.sqrt()
'''

WRAPPER = '''import torch
import torch.distributed as dist


class ShardedWrapper(torch.nn.Module):
    def broadcast_params(self):
        group = self.dist_index.get_dp_group()
        for param in self.module.parameters():
            dist.broadcast(param.data, src=0, group=group)
'''


def _function(text: str, entry: str, params: list[str]) -> tuple[dict, str]:
    cand, _ = candidate("divisible")
    cand.update(id="c" + format(abs(hash(entry)) % 16**15, "015x"), kind="function", entry=entry, qualname=entry,
                params=[{"name": p, "kind": "positional", "annotation": None, "default": None} for p in params])
    cand["module_path"] = f"modules/{cand['id']}.py"
    return cand, text


def test_a_module_global_left_none_becomes_a_parallel_state():
    """DeepSpeed `g_mpu = None` set by an init function elsewhere: `g_mpu.get_model_parallel_group()` gets
    the parallel-state stand-in (every group the world), as a module global of the harness."""
    res = synthesize(*_function(GLOBAL_MPU, "_gather", ["input_"]), FAST)
    assert res.accepted, (res.reason, res.last_error)
    assert res.spec["globals"] == [{"name": "g_mpu", "kind": "group", "value": "state"}]


def test_none_attribute_that_is_not_a_getter_is_not_a_parallel_state():
    err = {"type": "AttributeError", "msg": "'NoneType' object has no attribute 'hidden_size'",
           "line": "h = cfg.hidden_size * 2", "in_candidate": True}
    cand, _ = _function("", "f", ["x"])
    specs = propose({"entry": "f", "kind": "function", "args": [], "attrs": [], "n_attr": 8}, err, cand)
    added = [g for s in specs for g in s.get("globals", [])]
    assert added and all(g["kind"] == "namespace" for g in added)


def test_loop_variable_over_an_argument_makes_it_a_list_of_models():
    """Megatron `for model_chunk in model: model_chunk.parameters()`: `model` is a list of models."""
    assert loop_aliases("for i, chunk in enumerate(model):\n    for p in chunk.parameters():") == {"chunk": "model"}
    res = synthesize(*_function(CHUNKS, "calc_norm", ["model"]), FAST)
    assert res.accepted, (res.reason, res.last_error)
    assert res.spec["args"][0]["kind"] == "module" and res.spec["args"][0]["chunks"] == 2


def test_method_of_a_module_subclass_gets_submodules_and_a_parallel_state():
    """A `torch.nn.Module` subclass built without its `__init__` still accepts a model attribute (Module's
    own machinery is initialised), `self.dist_index.get_dp_group()` is a parallel-state object, and the
    broadcast parameters of the submodule are the output."""
    res = synthesize(*_method(WRAPPER, "ShardedWrapper.broadcast_params"), FAST)
    assert res.accepted, (res.reason, res.last_error)
    kinds = {a["name"]: (a["kind"], a.get("value")) for a in res.spec["attrs"]}
    assert kinds == {"module": ("module", None), "dist_index": ("group", "state")} and res.spec["state"] is True
