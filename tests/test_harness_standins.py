"""Stand-ins for repository globals and synthesized argument objects (scrapers/harness, issue 7)."""
from __future__ import annotations

import pytest

from scrapers.harness.guess import guess_arg
from scrapers.harness.mutate import propose
from scrapers.harness.render import prepare, stand_in
from scrapers.harness.search import Budget, synthesize
from tests.harness_cases import STANDIN_CASES, candidate

FAST = Budget(seconds=40, attempts=12, attempt_timeout_s=6, mem_mb=512)


@pytest.mark.parametrize("name", sorted(STANDIN_CASES))
def test_standin_cases_are_accepted(name):
    cand, text = candidate(name)
    res = synthesize(cand, text, FAST)
    assert res.accepted, (res.reason, res.last_error)
    assert all(fp["nonzero"] > 0 for fp in res.fingerprints["ws2"])
    kinds = {a["name"]: a for a in res.spec["args"]}
    if name == "config_obj":
        assert kinds["config"]["kind"] == "namespace"
        assert {f["name"] for f in kinds["config"]["fields"]} == {"average_in_collective", "gradient_scale"}
    if name == "dict_arg":
        assert kinds["batch"].get("dict") and [f["name"] for f in kinds["batch"]["fields"]] == ["loss"]
    if name == "main_grad":
        assert kinds["param"]["kind"] == "tensor" and kinds["param"]["fields"][0]["name"] == "main_grad"
    if name == "colossal_gpc":
        assert "colossalai.legacy.core.global_context" in res.stubbed


@pytest.mark.parametrize("module,name,expr", [
    ("colossalai.legacy.core", "global_context", "_MgGlobalContext()"),
    ("colossalai.legacy.context", "ParallelMode", "_MgEnum()"),
    ("megatron.core.process_groups_config", "ProcessGroupCollection", "_MgGroupCollection"),
    ("pytest", None, "_MgPytest()"),
    ("tests.unit_tests.test_utilities", "Utils", "_MgTestUtils()"),
    ("unit.common", "DistributedTest", "_MgDistributedTest"),
    ("deepspeed", None, "_MgDeepSpeed()"),
    ("deepspeed.utils", "instrument_w_nvtx", "_mg_passthrough"),
    ("colossalai.legacy.registry", "LAYERS", "_MgMarks()"),
    ("fairscale.nn.model_parallel", "initialize", "_MgParallelState()"),
])
def test_stand_in_table(module, name, expr):
    assert stand_in(module, name) == (expr, True)


def test_missing_base_class_becomes_an_empty_base():
    prep = prepare("from repo.optim import Wrapper\n\n\nclass Opt(Wrapper):\n    pass\n")
    assert prep.missing == ["repo.optim.Wrapper"]
    from scrapers.harness.render import runtime_source
    ns: dict = {}
    exec(runtime_source() + "\n" + prep.body, ns)
    assert ns["Opt"].__mro__[1].__name__ == "_MgBase"


def test_guesses_and_mutations_for_objects():
    assert guess_arg("config", None, None)["kind"] == "namespace"
    assert guess_arg("pg_collection", None, None) == {"name": "pg_collection", "kind": "group", "value": "collection"}
    cand = {"kind": "function", "entry": "f", "params": [{"name": "x", "kind": "positional"}]}
    spec = {"entry": "f", "kind": "function", "args": [{"name": "x", "kind": "tensor", "shape": ["n"]}], "attrs": []}
    err = {"type": "AttributeError", "msg": "'Tensor' object has no attribute 'hidden'", "line": "h = x.hidden * 2"}
    first, second = (s["args"][0] for s in propose(spec, err, cand)[:2])
    assert first["kind"] == "tensor" and first["fields"][0]["name"] == "hidden"      # e.g. param.main_grad
    assert second["kind"] == "namespace" and second["fields"][0]["name"] == "hidden"
    flag = {"type": "RuntimeError", "msg": "Boolean value of Tensor with more than one value is ambiguous",
            "line": "if x:"}
    assert [s["args"][0]["kind"] for s in propose(spec, flag, cand)[:2]] == ["bool", "bool"]


def test_report_gives_yield_with_and_without_test_files(tmp_path):
    import json

    from scrapers.harness.driver import report
    from tests.harness_cases import scrape_folder
    scrape = scrape_folder(tmp_path, ["grad_allreduce", "gather_out", "dict_arg", "divisible"])
    cands = [json.loads(x) for x in (scrape / "candidates.jsonl").read_text().splitlines()]
    cands[2]["role"] = "test"
    cands[0]["calls"] = cands[2]["calls"] = [{"op": "all_reduce"}, {"op": "barrier"}]
    cands[1]["calls"] = [{"op": "barrier"}, {"op": "all_gather_object"}]     # moves no tensor data
    cands[3]["calls"] = [{"op": "all_gather_into_tensor", "kind": "reference"}]   # an FX node, never called
    (scrape / "candidates.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cands))
    recs = [{"id": c["id"], "repo": "example/mined", "accepted": i == 0, "world_sizes": [2] if i == 0 else [],
             "reason": "" if i == 0 else "needs_import: pytest"} for i, c in enumerate(cands)]
    (scrape / "harness.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    text = report(scrape)
    assert "| example/mined | 4 | 4 | 1 | 25% | 0 | 3 | 1 | 33% |" in text
    assert "| needs_import (test file) | 1 |" in text and "| needs_import | 2 |" in text
    assert "| objects/barrier only | 1 | 0 | 0% |" in text and "| tensor data | 2 | 1 | 50% |" in text
    assert "| referenced, not called | 1 | 0 | 0% |" in text


def test_callables_ints_and_lists_from_errors():
    assert guess_arg("act_fn", None, None) == {"name": "act_fn", "kind": "fn", "value": "gelu"}
    cand = {"kind": "function", "entry": "f", "params": [{"name": "x", "kind": "positional"}]}
    spec = {"entry": "f", "kind": "function", "args": [{"name": "x", "kind": "tensor", "shape": ["n"]}], "attrs": []}
    call = {"type": "TypeError", "msg": "'Tensor' object is not callable", "line": "y = x(h)"}
    assert propose(spec, call, cand)[0]["args"][0]["kind"] == "fn"
    index = {"type": "TypeError", "msg": "only integer tensors of a single element can be converted to an index",
             "line": "range(x)"}
    assert any(s["args"][0]["kind"] == "int" for s in propose(spec, index, cand))
    ints = {**spec, "args": [{"name": "x", "kind": "int", "expr": "n"}]}
    loop = {"type": "TypeError", "msg": "'int' object is not iterable", "line": "for s in x:"}
    assert propose(ints, loop, cand)[0]["args"][0]["kind"] == "splits"
    back = {"type": "TypeError", "msg": "zeros_like(): argument 'input' (position 1) must be Tensor, not int",
            "line": "torch.zeros_like(x)"}
    assert propose(ints, back, cand)[0]["args"][0]["kind"] == "tensor"
