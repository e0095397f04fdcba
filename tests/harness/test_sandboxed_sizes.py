"""End-to-end: sizes fixed from errors, counts retried as sizes, unpacked shapes."""

from __future__ import annotations

import json

import pytest

from mgbench.scrapers.harness.inputs.search import synthesize
from mgbench.scrapers.harness.inputs.sizefix import size_fixes, unpack_fixes
from tests.harness.helpers import CODE, FAST_8_NO_WS4, FAST_14_NO_WS4, _function, entry_candidate
from tests.harness.helpers import _spec_json as _spec

pytestmark = pytest.mark.sandboxed  # runs candidates or tasks through child rank processes


SPLIT_FIRST = """import torch
import torch.distributed as dist


def split_first(inputs, tesseract_dim):
    out = inputs.chunk(tesseract_dim, dim=0)[dist.get_rank() % tesseract_dim].contiguous()
    dist.all_reduce(out)
    return out
"""


def test_a_count_guessed_as_zero_is_retried_as_a_size():
    """`tesseract_dim` looks like a dimension index (0) but is a chunk count: `chunks ... got: 0` retries it."""
    res = synthesize(*_function(SPLIT_FIRST, "split_first", ["inputs", "tesseract_dim"]), FAST_14_NO_WS4)
    assert res.accepted, (res.reason, res.last_error)
    assert res.spec["args"][1]["expr"] in ("ws", "n")


ROW_PARALLEL = """import torch
import torch.distributed as dist


def row_parallel_linear(x, weight):
    part = x.chunk(dist.get_world_size(), dim=-1)[dist.get_rank()]
    out = torch.nn.functional.linear(part, weight)
    dist.all_reduce(out)
    return out
"""


def test_sizes_named_by_the_error_fix_one_dimension():
    """`linear(part, weight)` with `part` a 1/ws slice: the weight's in-features take the size the matmul
    named (the blind shape list has no `n//ws`)."""
    spec = {"args": [{"name": "weight", "kind": "tensor", "shape": ["n", "n"]}], "attrs": []}
    fixes = size_fixes(spec, "mat1 and mat2 shapes cannot be multiplied (1x4 and 8x8)", spec["args"])
    assert [f["args"][0]["shape"] for f in fixes] == [["n//ws", "n"], ["n", "n//ws"]]
    spec = {"args": [{"name": "out", "kind": "tensor", "shape": ["n*ws"]}], "attrs": []}
    fixes = size_fixes(spec, "shape '[16]' is invalid for input of size 4", spec["args"])
    assert [f["args"][0]["shape"] for f in fixes] == [["n//ws"]]
    res = synthesize(*entry_candidate(ROW_PARALLEL, "row_parallel_linear", "function", ["x", "weight"]), FAST_14_NO_WS4)
    assert res.accepted, (res.reason, res.last_error)
    assert any("n//ws" in d for a in res.spec["args"] for d in a.get("shape", []))


def test_a_size_guessed_as_a_tensor_becomes_an_int():
    cand, _ = entry_candidate(CODE, "sized", params=["x", "hd"])
    res = synthesize(cand, CODE, FAST_8_NO_WS4)
    assert res.accepted, res.reason
    assert {a["name"]: a["kind"] for a in res.spec["args"]} == {"x": "tensor", "hd": "int"}


def test_unpacked_shape_gives_the_tensor_that_many_dimensions():
    spec = json.loads(_spec(x={"kind": "tensor", "shape": ["n"], "dtype": "float32"}))
    err = "not enough values to unpack (expected 3, got 1)"
    (fix,) = unpack_fixes(spec, err, "b, s, h = x.shape")
    assert fix["args"][0]["shape"] == ["n", "n", "n"]
    (fix,) = unpack_fixes(
        spec | {"args": [{**spec["args"][0], "shape": ["n"] * 4}]},
        "too many values to unpack (expected 3)",
        "b, s, h = x.size()",
    )
    assert fix["args"][0]["shape"] == ["n", "n", "n"]
    assert unpack_fixes(spec, err, "b, s, h = other_fn(x)") == []
    cand, _ = entry_candidate(CODE, "unpacked", params=["x"])
    res = synthesize(cand, CODE, FAST_8_NO_WS4)
    assert res.accepted and len(res.spec["args"][0]["shape"]) == 3, res.reason
