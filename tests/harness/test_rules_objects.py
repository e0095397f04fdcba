"""Search proposals (rules/order.py `propose`) for objects: paths, process groups, namespaces, `None` defaults and
None-typed errors, models from `.parameters()`, objects that are not a parallel state."""

from __future__ import annotations

import json

from mgbench.scrapers.harness.inputs.discovery.name_guess import guess_arg
from mgbench.scrapers.harness.inputs.rules.order import propose
from tests.harness.helpers import CAND, T, _cand, _function, _spec_json, _spec_of_args


def test_parameters_call_proposes_a_model_argument():
    spec = {
        "entry": "f",
        "kind": "function",
        "attrs": [],
        "n_attr": 8,
        "args": [{"name": "model", "kind": "tensor", "shape": ["n"], "dtype": "float32"}],
    }
    err = {
        "type": "AttributeError",
        "msg": "'Tensor' object has no attribute 'parameters'",
        "line": "for p in model.parameters():",
    }
    first = propose(spec, err, _cand("f", ["model"]))[0]
    assert first["args"][0]["kind"] == "module"


def test_path_rules():
    assert guess_arg("init_file", None, None) == {"name": "init_file", "kind": "path", "value": "str"}
    assert guess_arg("tmp_path_dist_ckpt", None, None)["value"] == "pathlib"
    assert guess_arg("save_dir", "Optional[str]", None)["kind"] == "path"
    assert guess_arg("file", "torch.Tensor", None)["kind"] == "tensor"
    err = {"type": "TypeError", "msg": "expected str, bytes or os.PathLike object, not Tensor", "line": "open(x)"}
    assert propose(_spec_of_args(T), err, CAND)[0]["args"][0] == {"name": "x", "kind": "path", "value": "str"}
    err = {"type": "TypeError", "msg": "unsupported operand type(s) for /: 'Tensor' and 'str'", "line": 'x / "a"'}
    assert propose(_spec_of_args(T), err, CAND)[0]["args"][0]["value"] == "pathlib"
    err = {"type": "TypeError", "msg": "unsupported operand type(s) for /: 'Tensor' and 'list'", "line": "x / y"}
    assert all(s["args"][0]["kind"] != "path" for s in propose(_spec_of_args(T), err, CAND))


def test_group_and_default_none_rules():
    g = {"name": "pg", "kind": "group", "value": "world"}
    cand = {
        "kind": "function",
        "entry": "f",
        "params": [{"name": "pg", "kind": "positional"}, {"name": "ctx", "kind": "positional", "default": "None"}],
    }

    def first(msg, line):
        return propose(_spec_of_args(g), {"type": "TypeError", "msg": msg, "line": line}, cand)[0]["args"]

    ns = first(
        "'torch._C._distributed_c10d.ProcessGroup' object has no attribute 'tp_world_size'", "n = pg.tp_world_size"
    )[0]
    assert ns["kind"] == "namespace" and ns["fields"] == [{"name": "tp_world_size", "kind": "int", "expr": "ws"}]
    assert first("'torch._C._distributed_c10d.ProcessGroup' object is not subscriptable", "pg[0]")[0]["value"] == "list"
    assert first(
        "'<=' not supported between instances of 'torch._C._distributed_c10d.ProcessGroup' and 'int'", "if pg <= 1:"
    )[0] == {"name": "pg", "kind": "int", "expr": "ws"}
    added = first("'NoneType' object has no attribute 'num_layers'", "k = ctx.num_layers")[1]
    assert added["name"] == "ctx" and added["keyword"] and added["fields"][0]["name"] == "num_layers"


def test_none_attribute_that_is_not_a_getter_is_not_a_parallel_state():
    err = {
        "type": "AttributeError",
        "msg": "'NoneType' object has no attribute 'hidden_size'",
        "line": "h = cfg.hidden_size * 2",
        "in_candidate": True,
    }
    cand, _ = _function("", "f", ["x"])
    cand["_text"] = "cfg = None\n"
    specs = propose({"entry": "f", "kind": "function", "args": [], "attrs": [], "n_attr": 8}, err, cand)
    added = [g for s in specs for g in s.get("globals", [])]
    assert added and all(g["kind"] == "namespace" for g in added)
    cand["_text"] = "def f(x):\n    cfg = x.get('cfg')\n"  # a local, not a module global: no global
    specs = propose({"entry": "f", "kind": "function", "args": [], "attrs": [], "n_attr": 8}, err, cand)
    assert not [g for s in specs for g in s.get("globals", [])]


def test_kwargs_list_and_path_errors_change_the_guessed_kind():
    cand = {"kind": "function", "entry": "f", "params": []}
    spec = json.loads(
        _spec_json(tensor_kwargs={"kind": "tensor", "shape": ["n"]}, inputs={"kind": "tensor", "shape": ["n"]})
    )
    err = {
        "type": "TypeError",
        "msg": "torch.tensor() argument after ** must be a mapping, not Tensor",
        "line": "t = torch.tensor(x.size(), **tensor_kwargs)",
    }
    assert any(
        s["args"][0] == {"name": "tensor_kwargs", "kind": "namespace", "dict": True, "fields": []}
        for s in propose(spec, err, cand)
    )
    err = {
        "type": "RuntimeError",
        "msg": "invalid input tensor list size, must be world size",
        "line": "reduce_scatter(out, inputs, group=g)",
    }
    assert any(s["args"][1]["kind"] == "tensors" and s["args"][1]["count"] == "ws" for s in propose(spec, err, cand))
    err = {
        "type": "TypeError",
        "msg": "join() argument must be str, bytes, or os.PathLike object, not 'Tensor'",
        "line": "p = os.path.join(inputs, 'x')",
    }
    assert any(s["args"][1]["kind"] == "path" for s in propose(spec, err, cand))


PLAIN = {"kind": "function", "entry": "f", "params": [], "_text": "", "_defined": set(), "_init": {}}


def _spec_with(*attrs: dict) -> dict:
    return {"entry": "TP_MLP.torch_gemm_rs", "kind": "method", "args": [], "globals": [], "attrs": list(attrs)}


def test_an_error_naming_nonetype_blames_the_none_not_the_int_on_the_line():
    ws = {"name": "world_size", "kind": "int", "expr": "ws"}
    proj = {"name": "down_proj", "kind": "const", "value": None}
    spec = _spec_with(ws, proj)
    err = {
        "type": "AttributeError",
        "msg": "'NoneType' object has no attribute 'shape'",
        "in_candidate": True,
        "line": "self.rs_buffer = torch.empty([M // self.world_size, self.down_proj.shape[0]], dtype=x.dtype)",
    }
    changed = [{a["name"] for a in s["attrs"] if a not in (ws, proj)} for s in propose(spec, err, PLAIN)]
    assert changed and all(c == {"down_proj"} for c in changed if c)
    # with no argument of that type on the line, every suspect is still tried
    spec2 = _spec_with(ws, {"name": "down_proj", "kind": "int", "expr": "n"})
    assert any(
        {a["name"] for a in s["attrs"] if a["kind"] == "tensor"} == {"world_size"} for s in propose(spec2, err, PLAIN)
    )


def test_a_transposed_none_becomes_a_matrix():
    proj = {"name": "gate_up_proj", "kind": "const", "value": None}
    err = {
        "type": "AttributeError",
        "msg": "'NoneType' object has no attribute 'T'",
        "in_candidate": True,
        "line": "return torch.matmul(ag_buffer, self.gate_up_proj.T)",
    }
    first = propose(_spec_with(proj), err, PLAIN)[0]
    assert first["attrs"][0]["kind"] == "tensor" and first["attrs"][0]["shape"] == ["n", "n"]


def test_guesses_and_mutations_for_objects():
    assert guess_arg("config", None, None)["kind"] == "namespace"
    assert guess_arg("pg_collection", None, None) == {"name": "pg_collection", "kind": "group", "value": "collection"}
    cand = {"kind": "function", "entry": "f", "params": [{"name": "x", "kind": "positional"}]}
    spec = {"entry": "f", "kind": "function", "args": [{"name": "x", "kind": "tensor", "shape": ["n"]}], "attrs": []}
    err = {"type": "AttributeError", "msg": "'Tensor' object has no attribute 'hidden'", "line": "h = x.hidden * 2"}
    first, second = (s["args"][0] for s in propose(spec, err, cand)[:2])
    assert first["kind"] == "tensor" and first["fields"][0]["name"] == "hidden"  # e.g. param.main_grad
    assert second["kind"] == "namespace" and second["fields"][0]["name"] == "hidden"
    flag = {
        "type": "RuntimeError",
        "msg": "Boolean value of Tensor with more than one value is ambiguous",
        "line": "if x:",
    }
    assert [s["args"][0]["kind"] for s in propose(spec, flag, cand)[:2]] == ["bool", "bool"]
