"""Harness rules of session 10: a tensor spread as a mapping, a list called as a function, index-named
arguments made integer first (mutate.py); annotations naming TYPE_CHECKING imports are quoted
(annotations.py, render.prepare); backend-module dispatch on CPU is needs_gpu (search.categorize)."""
from __future__ import annotations


def test_tensor_spread_as_mapping_and_list_called_as_function_are_mended():
    """`{**extra}` with `extra` guessed as a tensor ('Tensor' object is not a mapping) becomes an empty dict;
    a per-rank list that is called ('list' object is not callable) becomes a function."""
    from scrapers.harness.mutate import propose
    from tests.test_harness_inline import _candidate
    t = {"name": "extra", "kind": "tensor", "shape": ["n"], "dtype": "float32", "replicated": False}
    spec = {"args": [{"name": "x", "kind": "tensor", "shape": ["n"], "dtype": "float32", "replicated": False}, t],
            "attrs": [], "globals": []}
    err = {"type": "TypeError", "msg": "'Tensor' object is not a mapping", "line": "opts = {**extra, 'a': 1}"}
    got = [a for s in propose(spec, err, _candidate("f")) for a in s["args"] if a["name"] == "extra"]
    assert {"name": "extra", "kind": "namespace", "dict": True, "fields": []} in got
    fn = {**t, "name": "hook", "kind": "tensors", "count": "ws"}
    spec["args"][1] = fn
    err = {"type": "TypeError", "msg": "'list' object is not callable", "line": "y = hook(x)"}
    got = [a for s in propose(spec, err, _candidate("f")) for a in s["args"] if a["name"] == "hook"]
    assert any(a["kind"] == "fn" for a in got) and not any(a["kind"] == "fn" for s in propose(
        spec, {**err, "msg": "'dict' object is not callable"}, _candidate("f")) for a in s["args"])


TC_PRELUDE = '''import torch
import torch.distributed as dist
from typing import TYPE_CHECKING, Optional
if TYPE_CHECKING:
    from transformer_engine.pytorch.quantized_tensor import QuantizedTensor


class _Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor: QuantizedTensor, scale: Optional[QuantizedTensor] = None) -> QuantizedTensor:
        return tensor.detach()


class QuantizedTensor(torch.Tensor):
    pass


def f(x, group=None):
    dist.all_reduce(x, group=group)
    return _Identity.apply(x)
'''


def test_type_checking_names_in_annotations_are_quoted():
    """Flattened files lose their `from __future__ import annotations`: an annotation naming a TYPE_CHECKING
    import evaluated before the class is defined raised NameError at load (TransformerEngine
    `_IdentityFunc`); such annotations are quoted, other text stays."""
    from scrapers.harness.render import prepare
    from tests.test_harness_rules8 import _load
    import pytest
    with pytest.raises(NameError, match="QuantizedTensor"):
        _load(TC_PRELUDE)
    prep = prepare(TC_PRELUDE)
    assert "tensor: 'QuantizedTensor', scale: 'Optional[QuantizedTensor]' = None) -> 'QuantizedTensor':" in prep.body
    assert "class QuantizedTensor(torch.Tensor):" in prep.body
    ns = _load(prep.body)
    assert ns["_Identity"].forward.__annotations__["tensor"] == "QuantizedTensor"


def test_backend_module_dispatch_without_a_gpu_is_needs_gpu():
    """Triton-distributed's ModuleProxy asserts that exactly one of its CUDA/HIP backend modules is active:
    on CPU none is, a GPU need (final), not a search failure to mend; an unrelated assertion is not."""
    from scrapers.harness.sandbox import Attempt
    from scrapers.harness.search import categorize
    err = {"type": "AssertionError", "msg": "only one module can be active", "line": "", "in_candidate": True}
    assert categorize(Attempt("error", [{"ok": False, "error": err}])) == (
        "needs_gpu: only one module can be active", True)
    other = {**err, "msg": "only one rank can be active"}
    assert categorize(Attempt("error", [{"ok": False, "error": other}]))[1] is False


def test_index_named_argument_becomes_integer_first():
    """'tensors used as indices must be long' on a line naming no argument (`logits_2d[arange_1d, masked_1d]`):
    `target` is made int64 before `vocab_parallel_logits` (the depth-first search used to settle on integer
    logits for vocab-parallel cross entropy)."""
    from scrapers.harness.mutate import propose
    from tests.test_harness_inline import _candidate
    t = {"kind": "tensor", "shape": ["n"], "dtype": "float32", "replicated": False}
    spec = {"args": [{**t, "name": "vocab_parallel_logits"}, {**t, "name": "target"}], "attrs": [], "globals": []}
    err = {"type": "IndexError", "msg": "tensors used as indices must be long, int, byte or bool tensors",
           "line": "predicted_logits_1d = logits_2d[arange_1d, masked_target_1d]"}
    ints = [next(a["name"] for a in s["args"] if a.get("dtype") == "int64")
            for s in propose(spec, err, _candidate("f")) if any(a.get("dtype") == "int64" for a in s["args"])]
    assert ints[:2] == ["target", "vocab_parallel_logits"]
