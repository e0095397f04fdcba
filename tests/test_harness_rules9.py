"""Harness search of session 9: resizing that does not change a failure is not repeated (the budget goes to
other edits), and rules for sizes guessed as tensors, tensors guessed as ints, unpacked shapes, dict configs
and script globals."""
from __future__ import annotations

import json

import torch

from scrapers.harness.guess import guess_arg
from scrapers.harness.mutate import propose
from scrapers.harness.search import Budget, SizeMemo, synthesize
from scrapers.harness.sizes import unpack_fixes
from tests.harness_cases import entry_candidate

FAST = Budget(seconds=40, attempts=8, attempt_timeout_s=6, mem_mb=512, ws4_attempts=0)

CODE = '''import torch
import torch.distributed as dist


def stubborn(x):
    dist.all_reduce(x)
    raise ValueError("this entry never works")


def sized(x, hd):
    y = torch.ones(2, hd) * x.sum()
    dist.all_reduce(y)
    return y


def unpacked(x):
    b, s, h = x.shape
    dist.all_reduce(x)
    return x.reshape(b * s, h) * 2


def configured(x, config):
    m = config["M"]
    dist.all_reduce(x)
    return x * m
'''


def _spec(**args: dict) -> str:
    return json.dumps({"entry": "f", "kind": "function", "attrs": [], "n_attr": 8,
                       "args": [{"name": k, **v} for k, v in args.items()]}, sort_keys=True)


def test_a_resize_that_changes_nothing_stops_further_resizes_of_that_argument():
    memo = SizeMemo()
    a = _spec(x={"kind": "tensor", "shape": ["n"]}, k={"kind": "int", "expr": "n"})
    b = _spec(x={"kind": "tensor", "shape": ["n*ws"]}, k={"kind": "int", "expr": "n"})
    memo.ran(a, "ValueError: boom @ line")
    assert not memo.futile(b)
    memo.ran(b, "ValueError: boom @ line")
    assert memo.futile(_spec(x={"kind": "tensor", "shape": ["ws"]}, k={"kind": "int", "expr": "n"}))
    # another argument's size, or a change of kind, is still worth a run
    assert not memo.futile(_spec(x={"kind": "tensor", "shape": ["n"]}, k={"kind": "int", "expr": "1"}))
    assert not memo.futile(_spec(x={"kind": "int", "expr": "n"}, k={"kind": "int", "expr": "n"}))
    # another number of dimensions is a different structure until two of those fail alike too
    c = _spec(x={"kind": "tensor", "shape": ["n", "n"]}, k={"kind": "int", "expr": "n"})
    assert not memo.futile(c)
    memo.ran(c, "ValueError: boom @ line")
    assert memo.futile(_spec(x={"kind": "tensor", "shape": ["n", "n", "n"]}, k={"kind": "int", "expr": "n"}))


def test_an_argument_named_on_a_failing_line_without_numbers_keeps_its_sizes_open():
    memo = SizeMemo()
    memo.ran(_spec(x={"kind": "tensor", "shape": ["n"]}), "AssertionError: ", "assert x.size(0) % 3 == 0")
    memo.ran(_spec(x={"kind": "tensor", "shape": ["n*ws"]}), "AssertionError: ", "assert x.size(0) % 3 == 0")
    assert not memo.futile(_spec(x={"kind": "tensor", "shape": ["ws"]}))


def test_a_different_outcome_keeps_resizing_open():
    memo = SizeMemo()
    memo.ran(_spec(x={"kind": "tensor", "shape": ["n"]}), "RuntimeError: size 8 @ l")
    memo.ran(_spec(x={"kind": "tensor", "shape": ["n*ws"]}), "RuntimeError: size 16 @ l")
    assert not memo.futile(_spec(x={"kind": "tensor", "shape": ["ws"]}))


def test_an_entry_that_always_fails_alike_ends_before_the_budget():
    cand, _ = entry_candidate(CODE, "stubborn", params=["x"])
    res = synthesize(cand, CODE, FAST)
    assert not res.accepted and res.reason.startswith("search_exhausted"), res.reason
    assert res.attempts < FAST.attempts


def test_a_size_guessed_as_a_tensor_becomes_an_int():
    cand, _ = entry_candidate(CODE, "sized", params=["x", "hd"])
    res = synthesize(cand, CODE, FAST)
    assert res.accepted, res.reason
    assert {a["name"]: a["kind"] for a in res.spec["args"]} == {"x": "tensor", "hd": "int"}


def test_unpacked_shape_gives_the_tensor_that_many_dimensions():
    spec = json.loads(_spec(x={"kind": "tensor", "shape": ["n"], "dtype": "float32"}))
    err = "not enough values to unpack (expected 3, got 1)"
    (fix,) = unpack_fixes(spec, err, "b, s, h = x.shape")
    assert fix["args"][0]["shape"] == ["n", "n", "n"]
    (fix,) = unpack_fixes(spec | {"args": [{**spec["args"][0], "shape": ["n"] * 4}]},
                          "too many values to unpack (expected 3)", "b, s, h = x.size()")
    assert fix["args"][0]["shape"] == ["n", "n", "n"]
    assert unpack_fixes(spec, err, "b, s, h = other_fn(x)") == []
    cand, _ = entry_candidate(CODE, "unpacked", params=["x"])
    res = synthesize(cand, CODE, FAST)
    assert res.accepted and len(res.spec["args"][0]["shape"]) == 3, res.reason


def test_a_namespace_indexed_by_key_becomes_a_dict_and_single_letter_sizes_are_ints():
    from scrapers.harness.mutate import _field
    assert _field("M")["kind"] == "int" and guess_arg("M", None, None)["kind"] == "tensor"   # a parameter: as before
    cand, _ = entry_candidate(CODE, "configured", params=["x", "config"])
    res = synthesize(cand, CODE, FAST)
    assert res.accepted, res.reason
    cfg = next(a for a in res.spec["args"] if a["name"] == "config")
    assert cfg["dict"] and [f["kind"] for f in cfg["fields"]] == ["int"]


def test_int_indexed_becomes_a_tensor_and_script_globals_are_guessed():
    spec = json.loads(_spec(idx={"kind": "int", "expr": "n"}))
    out = propose(spec, {"type": "TypeError", "msg": "'int' object is not subscriptable", "line": "a = idx[0]"},
                  {"kind": "function", "entry": "f", "params": []})
    assert any(s["args"][0]["kind"] == "tensor" for s in out)
    err = {"type": "NameError", "msg": "name 'dtype' is not defined", "line": "f(dtype)", "in_candidate": True}
    out = propose(spec, err, {"kind": "function", "entry": "f", "params": []})
    assert any(g["name"] == "dtype" and g["kind"] == "dtype" for s in out for g in s.get("globals", []))
    err["msg"] = "name 'helper_fn' is not defined"
    assert not any(s.get("globals") for s in propose(spec, err, {"kind": "function", "entry": "f", "params": []}))


NUMPY = '''import numpy as np
import torch
import torch.distributed as dist


def scaled_mean(x):
    np.random.seed(0)
    scale = np.sqrt(x.numel()) * np.prod([1, 2]) / np.float32(2)
    dist.all_reduce(x)
    return x / scale


def uses_arrays(x):
    dist.all_reduce(x)
    return torch.from_numpy(np.asarray(x.numpy()) * 2)
'''


def test_numpy_scalar_math_runs_on_the_stand_in_and_arrays_still_need_numpy():
    from scrapers.harness.render import prepare
    assert "numpy" in prepare(NUMPY).missing and not prepare(NUMPY).standins      # only when asked for
    prep = prepare(NUMPY, numpy=True)
    assert "numpy" in prep.stubbed and "class _MgNumpy" in prep.standins and "np = _MgNumpy()" in prep.body
    guarded = prepare("try:\n    import numpy as np\nexcept ImportError:\n    np = None\n", numpy=True)
    assert "_MgNumpy" not in guarded.body                            # the module's own fallback runs
    cand, _ = entry_candidate(NUMPY, "scaled_mean", params=["x"])
    assert synthesize(cand, NUMPY, FAST).reason == "needs_import: numpy"
    res = synthesize({**cand, "numpy": True}, NUMPY, FAST)
    assert res.accepted and res.spec["numpy"], res.reason
    cand, _ = entry_candidate(NUMPY, "uses_arrays", params=["x"])
    res = synthesize({**cand, "numpy": True}, NUMPY, FAST)
    assert not res.accepted and res.reason == "needs_import: numpy.asarray"


def test_numpy_stand_in_rounds_and_types_like_numpy():
    ns: dict = {}
    from scrapers.harness.render import _below_marker, runtime_source
    exec(compile(runtime_source() + "\n" + _below_marker("standin_numpy.py"), "<np>", "exec"), ns)
    np = ns["_MgNumpy"]()
    assert np.float16(7e4) == float("inf") and np.uint8(300) == 44 and np.float32(0.1) != 0.1
    assert {np.float16: 2, np.float32: 4}[np.float16] == 2 and not isinstance(1.0, np.ndarray)
    assert np.ceil(2.5) == 3.0 and isinstance(np.ceil(2.5), float) and np.prod([2, 3]) == 6
    try:
        np.sqrt(torch.ones(3))
        raise AssertionError("an array argument must need numpy")
    except ImportError as e:
        assert "mgbench-missing-import: numpy" in str(e)


def test_tolerant_prelude_skips_failing_module_statements_only():
    from scrapers.harness.splice import tolerant
    prelude = ("import os\nLIMIT = 4\n\n\ndef backend():\n    raise RuntimeError('no GPU here')\n\n\n"
               "BACKEND = backend()\n\n\ndef helper(x):\n    return x * LIMIT\n")
    ns: dict = {}
    try:
        exec(compile(prelude, "<prelude>", "exec"), {})       # test-authored code only (not mined)
        raise AssertionError("the prelude should fail as written")
    except RuntimeError:
        pass
    guarded = tolerant(prelude + "FLAG = BACKEND\n")
    exec(compile(guarded, "<prelude>", "exec"), ns)         # a name left unbound does not fail the next one
    assert ns["helper"](2) == 8 and "BACKEND" not in ns and "try:\n    LIMIT" not in guarded
    assert tolerant("def broken(:\n") == "def broken(:\n"
    assert tolerant("LIMIT = 4\n\n\ndef f():\n    return g()\n") == "LIMIT = 4\n\n\ndef f():\n    return g()\n"
    doc = 'X = f("""a\nb""")\n'
    assert tolerant(doc) == doc                                     # indenting would change the string


def test_a_logging_helper_missing_from_the_extract_becomes_a_no_op_global():
    spec = json.loads(_spec(x={"kind": "tensor", "shape": ["n"]}))
    cand = {"kind": "function", "entry": "f", "params": []}
    err = {"type": "NameError", "msg": "name 'see_memory_usage' is not defined", "in_candidate": True,
           "line": "see_memory_usage('after step', force=False)"}
    (fix,) = [s for s in propose(spec, err, cand) if s.get("globals")]
    assert fix["globals"] == [{"name": "see_memory_usage", "kind": "fn", "value": "noop"}]
    err["line"] = "y = see_memory_usage('after step')"          # its result is used: not a no-op
    assert not any(s.get("globals") for s in propose(spec, err, cand))


def test_kwargs_list_and_path_errors_change_the_guessed_kind():
    cand = {"kind": "function", "entry": "f", "params": []}
    spec = json.loads(_spec(tensor_kwargs={"kind": "tensor", "shape": ["n"]}, inputs={"kind": "tensor", "shape": ["n"]}))
    err = {"type": "TypeError", "msg": "torch.tensor() argument after ** must be a mapping, not Tensor",
           "line": "t = torch.tensor(x.size(), **tensor_kwargs)"}
    assert any(s["args"][0] == {"name": "tensor_kwargs", "kind": "namespace", "dict": True, "fields": []}
               for s in propose(spec, err, cand))
    err = {"type": "RuntimeError", "msg": "invalid input tensor list size, must be world size",
           "line": "reduce_scatter(out, inputs, group=g)"}
    assert any(s["args"][1]["kind"] == "tensors" and s["args"][1]["count"] == "ws" for s in propose(spec, err, cand))
    err = {"type": "TypeError", "msg": "join() argument must be str, bytes, or os.PathLike object, not 'Tensor'",
           "line": "p = os.path.join(inputs, 'x')"}
    assert any(s["args"][1]["kind"] == "path" for s in propose(spec, err, cand))
