"""End-to-end: container and scalar arguments (parameters with gradients, lists of models, dicts, floats
drawn per seed) are synthesized and accepted."""

from __future__ import annotations

import pytest

from mgbench.scrapers.harness.inputs.discovery.name_guess import guess_arg
from mgbench.scrapers.harness.inputs.search import synthesize
from mgbench.scrapers.harness.make import runtime
from mgbench.scrapers.harness.make.specedit import loop_aliases
from tests.harness.helpers import CODE, FAST_8_NO_WS4, FAST_14_NO_WS4, _function, entry_candidate

pytestmark = pytest.mark.sandboxed  # runs candidates or tasks through child rank processes


CHUNKS = """import torch
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
"""


def test_loop_variable_over_an_argument_makes_it_a_list_of_models():
    """Megatron `for model_chunk in model: model_chunk.parameters()`: `model` is a list of models."""
    assert loop_aliases("for i, chunk in enumerate(model):\n    for p in chunk.parameters():") == {"chunk": "model"}
    res = synthesize(*_function(CHUNKS, "calc_norm", ["model"]), FAST_14_NO_WS4)
    assert res.accepted, (res.reason, res.last_error)
    assert res.spec["args"][0]["kind"] == "module" and res.spec["args"][0]["chunks"] == 2


NESTED = """import torch
import torch.distributed as dist


def _broadcast_nested(nested):
    for k, v in nested.items():
        dist.broadcast(v, src=0)
    return nested


def broadcast_batch(nested_dict):
    return _broadcast_nested(nested_dict)
"""


def test_a_dict_used_through_a_helper_gets_per_rank_tensor_entries():
    """`nested.items()` inside a helper: the tensor argument named like a dict becomes a dict with two
    per-rank tensor entries (an empty dict would communicate nothing)."""
    res = synthesize(*_function(NESTED, "broadcast_batch", ["nested_dict"]), FAST_14_NO_WS4)
    assert res.accepted, (res.reason, res.last_error)
    a = res.spec["args"][0]
    assert a["dict"] and [f["name"] for f in a["fields"]] == ["w0", "w1"]
    assert not any(f.get("replicated") for f in a["fields"])


GRAD_NORM = """import torch
import torch.distributed as dist


def global_grad_norm(parameters, norm_type=2, mpu=None):
    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    parameters = [p for p in parameters if p.grad is not None]
    norm_type = float(norm_type)
    total = torch.zeros(1)
    for p in parameters:
        total += p.grad.detach().float().norm(norm_type) ** norm_type
    if mpu is not None:
        dist.all_reduce(total, group=mpu.get_model_parallel_group())
    return total ** (1.0 / norm_type)
"""


CLIP = """import torch
import torch.distributed as dist


def clip_grads(parameters, max_norm):
    grads = [p.grad for p in parameters if p.grad is not None]
    max_norm = float(max_norm)
    total = torch.stack([g.norm() ** 2 for g in grads]).sum()
    dist.all_reduce(total)
    coef = max_norm / (total.sqrt() + 1e-6)
    for g in grads:
        g.mul_(torch.clamp(coef, max=1.0))
    return total.sqrt()
"""


def _with_defaults(text: str, entry: str, required: list[str], defaults: dict[str, str]) -> tuple[dict, str]:
    cand, text = entry_candidate(text, entry, "function", required)
    cand["params"] += [{"name": k, "kind": "positional", "annotation": None, "default": v} for k, v in defaults.items()]
    return cand, text


def test_gradient_norm_gets_parameters_with_gradients_and_a_parallel_state():
    """DeepSpeed-style `get_grad_norm(parameters, norm_type=2, mpu=None)`: tensors without `.grad` are all
    filtered out (no communication); the harness passes parameters with per-rank gradients, a float norm
    type and a parallel-state `mpu`."""
    res = synthesize(
        *_with_defaults(GRAD_NORM, "global_grad_norm", ["parameters"], {"norm_type": "2", "mpu": "None"}),
        FAST_14_NO_WS4,
    )
    assert res.accepted, (res.reason, res.last_error)
    args = {a["name"]: a for a in res.spec["args"]}
    assert args["parameters"]["kind"] == "tensors" and args["parameters"]["grads"] is True
    assert args["mpu"] == {"name": "mpu", "kind": "group", "value": "state", "keyword": True}
    assert args["norm_type"]["kind"] == "float"


def test_clipping_reads_max_norm_as_a_float_and_outputs_the_clipped_gradients():
    """`float(max_norm)` on a guessed tensor fails with 'only one element tensors...': the argument is a float;
    gradients clipped in place are part of what the harness compares."""
    res = synthesize(*_with_defaults(CLIP, "clip_grads", ["parameters", "max_norm"], {}), FAST_14_NO_WS4)
    assert res.accepted, (res.reason, res.last_error)
    args = {a["name"]: a for a in res.spec["args"]}
    assert args["max_norm"]["kind"] == "float" and args["parameters"].get("grads") is True


KEYED = """import torch
import torch.distributed as dist


def broadcast_batch(keys, data, kind):
    sizes = {}
    for key in keys:
        assert data[key].dtype == kind
        sizes[key] = data[key].numel()
    flat = torch.cat([data[key].reshape(-1) for key in keys])
    dist.broadcast(flat, src=0)
    out, offset = {}, 0
    for key in keys:
        out[key] = flat[offset:offset + sizes[key]].view_as(data[key])
        offset += sizes[key]
    return out
"""


CACHED = """import torch
import torch.distributed as dist


class Reducer:
    def reduce_async(self, tensor):
        key = (tensor.dtype, tensor.numel())
        if key not in self.cache:
            self.cache[key] = torch.zeros_like(tensor)
        buf = self.cache[key]
        buf.copy_(tensor * 2)
        dist.all_reduce(buf)
        return buf
"""


STAT = """import torch
import torch.distributed as dist


def reduce_max_stat(stat):
    t = torch.tensor([stat], dtype=torch.float32)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()
"""


def test_a_dict_read_through_a_list_of_keys():
    """Megatron-style `broadcast_data(keys, data, datatype)`: `data[key]` for `key in keys` makes `data` a dict
    of per-rank tensors and `keys` its key list."""
    res = synthesize(*entry_candidate(KEYED, "broadcast_batch", "function", ["keys", "data", "kind"]), FAST_14_NO_WS4)
    assert res.accepted, (res.reason, res.last_error)
    args = {a["name"]: a for a in res.spec["args"]}
    assert args["keys"] == {"name": "keys", "kind": "const", "value": ["w0", "w1"]}
    assert args["data"]["dict"] is True and [f["name"] for f in args["data"]["fields"]] == ["w0", "w1"]


def test_a_membership_test_on_an_attribute_makes_it_a_dict():
    res = synthesize(*entry_candidate(CACHED, "Reducer.reduce_async", "method", ["self", "tensor"]), FAST_14_NO_WS4)
    assert res.accepted, (res.reason, res.last_error)
    assert {"name": "cache", "kind": "namespace", "dict": True, "fields": []} in res.spec["attrs"]


def test_a_reduced_float_statistic_is_drawn_per_seed():
    """A float input held constant makes the task input-insensitive; drawn per rank and seed it is not, and
    the value differs between seeds (zeros and another seed fail the comparison)."""
    res = synthesize(*entry_candidate(STAT, "reduce_max_stat", "function", ["stat"]), FAST_14_NO_WS4)
    assert res.accepted, (res.reason, res.last_error)
    assert res.spec["args"][0]["kind"] == "float" and res.spec["args"][0]["draw"] is True
    a = res.spec["args"][0]
    assert runtime._mg_value(a, 0, 0, 0, 2, 8, "cpu") != runtime._mg_value(a, 0, 1, 0, 2, 8, "cpu")


def test_a_namespace_indexed_by_key_becomes_a_dict_and_single_letter_sizes_are_ints():
    from mgbench.scrapers.harness.inputs.discovery.name_guess import guess_field as _field

    assert _field("M")["kind"] == "int" and guess_arg("M", None, None)["kind"] == "tensor"  # a parameter: as before
    cand, _ = entry_candidate(CODE, "configured", params=["x", "config"])
    res = synthesize(cand, CODE, FAST_8_NO_WS4)
    assert res.accepted, res.reason
    cfg = next(a for a in res.spec["args"] if a["name"] == "config")
    assert cfg["dict"] and [f["kind"] for f in cfg["fields"]] == ["int"]
