"""Search proposals (rules/order.py `propose`) for callables and module globals: guessed functions that are no-ops,
the called name as the function, constant-like and logging globals, lists or tensors called or spread."""

from __future__ import annotations

import json

from mgbench.scrapers.harness.inputs.discovery.name_guess import guess_arg
from mgbench.scrapers.harness.inputs.rules.order import propose
from tests.harness.helpers import CAND, T, _candidate, _spec_json, _spec_of_args, _t


def test_callable_rules():
    gelu = {"name": "x", "kind": "fn", "value": "gelu"}
    err = {"type": "TypeError", "msg": 'gelu() missing 1 required positional arguments: "input"', "line": "x()"}
    assert propose(_spec_of_args(gelu), err, CAND)[0]["args"][0] == {"name": "x", "kind": "fn", "value": "noop"}
    lst = {"name": "x", "kind": "tensors", "count": "ws", "shape": ["n"]}
    err = {"type": "TypeError", "msg": "'list' object is not callable", "line": "y = x(1)"}
    assert propose(_spec_of_args(lst), err, CAND)[0]["args"][0]["value"] == "noop"
    err = {"type": "TypeError", "msg": "'int' object is not callable", "line": "y = other(1)"}
    assert all(s["args"][0].get("value") != "noop" for s in propose(_spec_of_args(T), err, CAND))


def test_global_rule_only_for_constant_like_names():
    err = {
        "type": "NameError",
        "msg": "name 'SimpleModel' is not defined",
        "line": "m = SimpleModel()",
        "in_candidate": True,
    }
    assert not any(s.get("globals") for s in propose(_spec_of_args(T), err, CAND))
    err = {**err, "msg": "name 'BATCH_SIZE' is not defined", "line": "b = BATCH_SIZE"}
    assert propose(_spec_of_args(T), err, CAND)[0]["globals"] == [{"name": "BATCH_SIZE", "kind": "int", "expr": "n"}]
    assert not any(s.get("globals") for s in propose(_spec_of_args(T), {**err, "in_candidate": False}, CAND))


def test_int_indexed_becomes_a_tensor_and_script_globals_are_guessed():
    spec = json.loads(_spec_json(idx={"kind": "int", "expr": "n"}))
    out = propose(
        spec,
        {"type": "TypeError", "msg": "'int' object is not subscriptable", "line": "a = idx[0]"},
        {"kind": "function", "entry": "f", "params": []},
    )
    assert any(s["args"][0]["kind"] == "tensor" for s in out)
    err = {"type": "NameError", "msg": "name 'dtype' is not defined", "line": "f(dtype)", "in_candidate": True}
    out = propose(spec, err, {"kind": "function", "entry": "f", "params": []})
    assert any(g["name"] == "dtype" and g["kind"] == "dtype" for s in out for g in s.get("globals", []))
    err["msg"] = "name 'helper_fn' is not defined"
    assert not any(s.get("globals") for s in propose(spec, err, {"kind": "function", "entry": "f", "params": []}))


def test_a_logging_helper_missing_from_the_extract_becomes_a_no_op_global():
    spec = json.loads(_spec_json(x={"kind": "tensor", "shape": ["n"]}))
    cand = {"kind": "function", "entry": "f", "params": []}
    err = {
        "type": "NameError",
        "msg": "name 'see_memory_usage' is not defined",
        "in_candidate": True,
        "line": "see_memory_usage('after step', force=False)",
    }
    (fix,) = [s for s in propose(spec, err, cand) if s.get("globals")]
    assert fix["globals"] == [{"name": "see_memory_usage", "kind": "fn", "value": "noop"}]
    err["line"] = "y = see_memory_usage('after step')"  # its result is used: not a no-op
    assert not any(s.get("globals") for s in propose(spec, err, cand))


def test_tensor_spread_as_mapping_and_list_called_as_function_are_mended():
    """`{**extra}` with `extra` guessed as a tensor ('Tensor' object is not a mapping) becomes an empty dict;
    a per-rank list that is called ('list' object is not callable) becomes a function."""
    from mgbench.scrapers.harness.inputs.rules.order import propose
    from tests.harness.helpers import _candidate

    t = {"name": "extra", "kind": "tensor", "shape": ["n"], "dtype": "float32", "replicated": False}
    spec = {
        "args": [{"name": "x", "kind": "tensor", "shape": ["n"], "dtype": "float32", "replicated": False}, t],
        "attrs": [],
        "globals": [],
    }
    err = {"type": "TypeError", "msg": "'Tensor' object is not a mapping", "line": "opts = {**extra, 'a': 1}"}
    got = [a for s in propose(spec, err, _candidate("f")) for a in s["args"] if a["name"] == "extra"]
    assert {"name": "extra", "kind": "namespace", "dict": True, "fields": []} in got
    fn = {**t, "name": "hook", "kind": "tensors", "count": "ws"}
    spec["args"][1] = fn
    err = {"type": "TypeError", "msg": "'list' object is not callable", "line": "y = hook(x)"}
    got = [a for s in propose(spec, err, _candidate("f")) for a in s["args"] if a["name"] == "hook"]
    assert any(a["kind"] == "fn" for a in got) and not any(
        a["kind"] == "fn"
        for s in propose(spec, {**err, "msg": "'dict' object is not callable"}, _candidate("f"))
        for a in s["args"]
    )


def test_guessed_callables_keyword_complaint_keeps_the_entrys_arguments():
    """`init(self.weight, fan_in=...)` with `init` guessed as gelu: it becomes a no-op; the entry's last
    argument (another initializer) is not dropped as if the entry had been given too many."""
    spec = {
        "args": [{"name": "init", "kind": "fn", "value": "gelu"}, _t("bias_init")],
        "attrs": [],
        "globals": [],
        "entry": "Layer.reset_parameters",
    }
    err = {
        "type": "TypeError",
        "msg": "gelu() got an unexpected keyword argument 'fan_in'",
        "line": "init(self.weight, fan_in=fan_in)",
    }
    got = propose(spec, err, _candidate("f"))
    assert got and all(len(s["args"]) == 2 for s in got)
    assert any(a["name"] == "init" and a.get("value") == "noop" for s in got for a in s["args"])
    own = {**err, "msg": "Layer.reset_parameters() got an unexpected keyword argument 'x'"}
    assert any(len(s["args"]) == 1 for s in propose(spec, own, _candidate("f")))


def test_the_called_name_becomes_the_function():
    spec = {"args": [_t("features")], "attrs": [_t("projection")], "globals": [], "entry": "M.forward"}
    err = {"type": "TypeError", "msg": "'Tensor' object is not callable", "line": "y = self.projection(features)"}
    fns = [a["name"] for s in propose(spec, err, _candidate("f")) for a in s["args"] + s["attrs"] if a["kind"] == "fn"]
    assert "projection" in fns and "features" not in fns


def test_callables_ints_and_lists_from_errors():
    assert guess_arg("act_fn", None, None) == {"name": "act_fn", "kind": "fn", "value": "gelu"}
    cand = {"kind": "function", "entry": "f", "params": [{"name": "x", "kind": "positional"}]}
    spec = {"entry": "f", "kind": "function", "args": [{"name": "x", "kind": "tensor", "shape": ["n"]}], "attrs": []}
    call = {"type": "TypeError", "msg": "'Tensor' object is not callable", "line": "y = x(h)"}
    assert propose(spec, call, cand)[0]["args"][0]["kind"] == "fn"
    index = {
        "type": "TypeError",
        "msg": "only integer tensors of a single element can be converted to an index",
        "line": "range(x)",
    }
    assert any(s["args"][0]["kind"] == "int" for s in propose(spec, index, cand))
    ints = {**spec, "args": [{"name": "x", "kind": "int", "expr": "n"}]}
    loop = {"type": "TypeError", "msg": "'int' object is not iterable", "line": "for s in x:"}
    assert propose(ints, loop, cand)[0]["args"][0]["kind"] == "splits"
    back = {
        "type": "TypeError",
        "msg": "zeros_like(): argument 'input' (position 1) must be Tensor, not int",
        "line": "torch.zeros_like(x)",
    }
    assert propose(ints, back, cand)[0]["args"][0]["kind"] == "tensor"
