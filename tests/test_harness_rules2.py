"""Harness rules of session 2b (scrapers/harness): P2POp with traced isend/irecv, subscripted placeholders,
no-op callables, scratch paths, lists to fill. Small hand-written candidates only."""
from __future__ import annotations

import pytest

from scrapers.harness.guess import guess_arg
from scrapers.harness.mutate import propose
from scrapers.harness.render import prepare, runtime_source
from scrapers.harness.search import Budget, synthesize
from tests.harness_cases import CASES, candidate

FAST = Budget(seconds=40, attempts=12, attempt_timeout_s=6, mem_mb=512)

RULE_CASES = {
    # P2POp checks `op in (isend, irecv)`: the tracer must wrap dist.isend and c10d.isend as one object
    "p2p_ring": ('''import torch
import torch.distributed as dist


def ring_shift(x, group):
    rank, ws = dist.get_rank(group), dist.get_world_size(group)
    out = torch.empty_like(x)
    ops = [dist.P2POp(dist.isend, x, (rank + 1) % ws, group), dist.P2POp(dist.irecv, out, (rank - 1) % ws, group)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    return out * 2 + x
''', ["x", "group"]),
    # a repository generic used as a base class: `Awaitable[int]` on a placeholder when the class is defined
    "generic_base": ('''import torch
import torch.distributed as dist
from repo.types import Awaitable


class Req(Awaitable[int]):
    pass


def reduce_sum(x):
    y = x.clone()
    dist.all_reduce(y)
    return y + 1
''', ["x"]),
    # `hook` is guessed a tensor, then gelu (called without an input), then a no-op callable
    "noop_hook": ('''import torch
import torch.distributed as dist


def reduce_with_hook(grad, hook):
    hook()
    dist.all_reduce(grad)
    return grad * 3
''', ["grad", "hook"]),
    # `pending` is filled with `.append`: an empty list
    "append_list": ('''import torch
import torch.distributed as dist


def gather_pending(x, pending):
    pending.append(x * 2)
    dist.all_reduce(pending[0])
    return pending[0]
''', ["x", "pending"]),
    # module globals the extracted code lacks (set by an init function or under `__main__`)
    "module_globals": ('''import torch
import torch.distributed as dist


def reduce_head(x):
    y = x[:HIDDEN_SIZE].clone()
    dist.all_reduce(y, group=_EP_GROUP)
    return y * WORLD_SIZE
''', ["x"]),
}


@pytest.mark.parametrize("name", sorted(RULE_CASES))
def test_rule_cases_are_accepted(name, monkeypatch):
    monkeypatch.setitem(CASES, name, RULE_CASES[name])
    cand, text = candidate(name)
    res = synthesize(cand, text, FAST)
    assert res.accepted, (res.reason, res.last_error)
    kinds = {a["name"]: a for a in res.spec["args"]}
    if name == "noop_hook":
        assert kinds["hook"] == {"name": "hook", "kind": "fn", "value": "noop"}
    if name == "module_globals":
        assert {g["name"]: g["kind"] for g in res.spec["globals"]} == {"HIDDEN_SIZE": "int", "_EP_GROUP": "group",
                                                                       "WORLD_SIZE": "int"}
    if name == "append_list":
        assert kinds["pending"]["kind"] == "tensors" and kinds["pending"]["count"] == "0"


def _spec(*args):
    return {"entry": "f", "kind": "function", "args": list(args), "attrs": []}


CAND = {"kind": "function", "entry": "f", "params": [{"name": "x", "kind": "positional"}]}
T = {"name": "x", "kind": "tensor", "shape": ["n"], "dtype": "float32"}


def test_callable_rules():
    gelu = {"name": "x", "kind": "fn", "value": "gelu"}
    err = {"type": "TypeError", "msg": 'gelu() missing 1 required positional arguments: "input"', "line": "x()"}
    assert propose(_spec(gelu), err, CAND)[0]["args"][0] == {"name": "x", "kind": "fn", "value": "noop"}
    lst = {"name": "x", "kind": "tensors", "count": "ws", "shape": ["n"]}
    err = {"type": "TypeError", "msg": "'list' object is not callable", "line": "y = x(1)"}
    assert propose(_spec(lst), err, CAND)[0]["args"][0]["value"] == "noop"
    err = {"type": "TypeError", "msg": "'int' object is not callable", "line": "y = other(1)"}
    assert all(s["args"][0].get("value") != "noop" for s in propose(_spec(T), err, CAND))


def test_global_rule_only_for_constant_like_names():
    err = {"type": "NameError", "msg": "name 'SimpleModel' is not defined", "line": "m = SimpleModel()",
           "in_candidate": True}
    assert not any(s.get("globals") for s in propose(_spec(T), err, CAND))
    err = {**err, "msg": "name 'BATCH_SIZE' is not defined", "line": "b = BATCH_SIZE"}
    assert propose(_spec(T), err, CAND)[0]["globals"] == [{"name": "BATCH_SIZE", "kind": "int", "expr": "n"}]
    assert not any(s.get("globals") for s in propose(_spec(T), {**err, "in_candidate": False}, CAND))


def test_path_rules():
    assert guess_arg("init_file", None, None) == {"name": "init_file", "kind": "path", "value": "str"}
    assert guess_arg("tmp_path_dist_ckpt", None, None)["value"] == "pathlib"
    assert guess_arg("save_dir", "Optional[str]", None)["kind"] == "path"
    assert guess_arg("file", "torch.Tensor", None)["kind"] == "tensor"
    err = {"type": "TypeError", "msg": "expected str, bytes or os.PathLike object, not Tensor", "line": "open(x)"}
    assert propose(_spec(T), err, CAND)[0]["args"][0] == {"name": "x", "kind": "path", "value": "str"}
    err = {"type": "TypeError", "msg": "unsupported operand type(s) for /: 'Tensor' and 'str'", "line": 'x / "a"'}
    assert propose(_spec(T), err, CAND)[0]["args"][0]["value"] == "pathlib"
    err = {"type": "TypeError", "msg": "unsupported operand type(s) for /: 'Tensor' and 'list'", "line": "x / y"}
    assert all(s["args"][0]["kind"] != "path" for s in propose(_spec(T), err, CAND))


def test_runtime_placeholder_subscript_and_values(monkeypatch, tmp_path):
    prep = prepare("from repo.types import Awaitable, Codec\n\n\nclass Req(Awaitable[int]):\n    c: Codec | None = None"
                   "\n\n\nclass Sub(Req[int]):\n    pass\n")
    ns: dict = {}
    exec(runtime_source() + "\n" + prep.body, ns)
    assert [c.__name__ for c in ns["Sub"].__mro__] == ["Sub", "Req", "_MgBase", "object"]
    val = ns["_mg_value"]
    assert val({"kind": "fn", "value": "noop"}, 0, 0, 0, 2, 8, "cpu")(1, k=2) is None
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    p = val({"kind": "path", "value": "pathlib"}, 0, 0, 1, 2, 8, "cpu")
    assert p == val({"kind": "path", "value": "pathlib"}, 0, 0, 0, 2, 8, "cpu") and p.parent == tmp_path
    assert isinstance(val({"kind": "path", "value": "str"}, 0, 0, 0, 2, 8, "cpu"), str)


def test_group_and_default_none_rules():
    g = {"name": "pg", "kind": "group", "value": "world"}
    cand = {"kind": "function", "entry": "f", "params": [{"name": "pg", "kind": "positional"},
                                                         {"name": "ctx", "kind": "positional", "default": "None"}]}
    def first(msg, line):
        return propose(_spec(g), {"type": "TypeError", "msg": msg, "line": line}, cand)[0]["args"]
    ns = first("'torch._C._distributed_c10d.ProcessGroup' object has no attribute 'tp_world_size'",
               "n = pg.tp_world_size")[0]
    assert ns["kind"] == "namespace" and ns["fields"] == [{"name": "tp_world_size", "kind": "int", "expr": "ws"}]
    assert first("'torch._C._distributed_c10d.ProcessGroup' object is not subscriptable", "pg[0]")[0]["value"] == "list"
    assert first("'<=' not supported between instances of 'torch._C._distributed_c10d.ProcessGroup' and 'int'",
                 "if pg <= 1:")[0] == {"name": "pg", "kind": "int", "expr": "ws"}
    added = first("'NoneType' object has no attribute 'num_layers'", "k = ctx.num_layers")[1]
    assert added["name"] == "ctx" and added["keyword"] and added["fields"][0]["name"] == "num_layers"
