"""Arguments captured from the repository's own tests (scrapers/harness/inputs/discovery/capture/): the test
callers the call-site scan finds, the recorder, the fit of sizes to expressions, and a real capture run on gloo ranks
whose arguments become the candidate's initial spec."""

from __future__ import annotations

import json
import textwrap
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from mgbench.scrapers.harness.driver import _with_capture
from mgbench.scrapers.harness.inputs.discovery.callsites import Want, _tests_through_library, scan_repo
from mgbench.scrapers.harness.inputs.discovery.capture.caller import caller_candidate
from mgbench.scrapers.harness.inputs.discovery.capture.fit import fit_arg, fit_args, fit_int
from mgbench.scrapers.harness.inputs.discovery.capture.record import Captured, describe, install
from mgbench.scrapers.harness.inputs.discovery.capture.run import capture_one, load, refit, run, summary
from mgbench.scrapers.harness.inputs.discovery.guess import evidence_spec
from mgbench.scrapers.harness.make.render import SMOKE_N
from mgbench.scrapers.harness.make.runtime import _mg_eval

OPS = """
import torch
import torch.distributed as dist


def vocab_ce(logits, target, vocab_size):
    local_max = logits.float().max(dim=-1).values
    dist.all_reduce(local_max, op=dist.ReduceOp.MAX)
    return local_max


class _MaxFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target):
        local_max = logits.float().max(dim=-1).values
        dist.all_reduce(local_max, op=dist.ReduceOp.MAX)
        return local_max


def max_loss(logits, target):
    return _MaxFn.apply(logits, target)


class RowLinear(torch.nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n_out, n_in))

    def forward(self, x):
        y = x @ self.weight.t()
        dist.all_reduce(y)
        return y
"""
TEST = """
import torch
import torch.distributed as dist
from pkg.ops import RowLinear, max_loss, vocab_ce


def test_vocab_ce():
    ws = dist.get_world_size()
    vocab = 40
    logits = torch.randn(16, 4, vocab // ws, dtype=torch.bfloat16)
    target = torch.arange(64).view(16, 4) % 20
    vocab_ce(logits, target, vocab)
    raise AssertionError("never reached: the recorder stops the test at the call")


class TestRow:
    def test_forward(self):
        layer = RowLinear(32, 8)
        layer(torch.randn(12, 32))


def test_never_calls():
    return None


def test_max_loss():
    max_loss(torch.randn(24, 16), torch.zeros(24, dtype=torch.long))
"""


def _cand(entry: str, kind: str, params: list[str]) -> dict:
    return {
        "id": f"c_{entry}",
        "entry": entry,
        "qualname": entry,
        "kind": kind,
        "params": [{"name": p, "kind": "positional", "annotation": None, "default": None} for p in params],
        "docstring": None,
        "decorators": [],
        "provenance": {
            "repo": "acme/pkg",
            "path": "pkg/ops.py",
            "commit": "0" * 40,
            "license": "MIT",
            "line_start": 1,
            "line_end": 9,
            "url": None,
        },
    }


VOCAB_CE = _cand("vocab_ce", "function", ["logits", "target", "vocab_size"])
ROW_FORWARD = _cand("RowLinear.forward", "method", ["self", "x"])
MAX_FN = _cand("_MaxFn", "autograd_function", [])  # an autograd.Function's record has no parameters


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "pkg"
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "ops.py").write_text(textwrap.dedent(OPS))
    (root / "tests" / "test_ops.py").write_text(textwrap.dedent(TEST))
    return root


def test_scan_finds_test_callers_of_functions_and_of_built_modules(checkout: Path) -> None:
    found = scan_repo(checkout, [Want(VOCAB_CE), Want(ROW_FORWARD)])
    assert [(c["path"], c["class"], c["function"]) for c in found["c_vocab_ce"]["callers"]] == [
        ("tests/test_ops.py", "", "test_vocab_ce")
    ]
    # `forward` is never named at a call site: the test that builds the module is its caller
    assert [(c["class"], c["function"]) for c in found["c_RowLinear.forward"]["callers"]] == [
        ("TestRow", "test_forward")
    ]


def test_tests_reach_an_entry_through_one_library_unit(checkout: Path) -> None:
    found = scan_repo(checkout, [Want(MAX_FN)])
    assert not found["c__MaxFn"]["callers"] and found["c__MaxFn"]["via"][0]["function"] == "max_loss"
    _tests_through_library(checkout, [MAX_FN], found)
    assert found["c__MaxFn"]["callers"] == [
        {
            "path": "tests/test_ops.py",
            "class": "",
            "function": "test_max_loss",
            "line": 27,
            "through": "pkg/ops.py::max_loss",
        }
    ]


def test_capture_through_a_library_unit_of_an_autograd_function(checkout: Path) -> None:
    caller = {"path": "tests/test_ops.py", "class": "", "function": "test_max_loss"}
    cap = capture_one(MAX_FN, [caller], checkout, textwrap.dedent(OPS))
    assert cap.status == "captured", cap.reason
    assert cap.params == ["logits", "target"]  # from forward, after ctx
    assert cap.args["logits"]["shape"] == [f"24*n//{SMOKE_N}", f"16*n//{SMOKE_N}"]
    spec, _ = evidence_spec({**MAX_FN, "captured": asdict(cap)})
    assert [a["name"] for a in spec["args"]] == ["logits", "target"]


def test_caller_candidate_names_the_unit_and_its_parameters(checkout: Path) -> None:
    text = (checkout / "tests" / "test_ops.py").read_text()
    rec = caller_candidate(
        VOCAB_CE, {"path": "tests/test_ops.py", "class": "TestRow", "function": "test_forward"}, text
    )
    assert rec is not None and rec["entry"] == "TestRow.test_forward" and rec["kind"] == "method"
    assert [p["name"] for p in rec["params"]] == ["self"]
    assert rec["provenance"]["path"] == "tests/test_ops.py"
    assert caller_candidate(VOCAB_CE, {"path": "t.py", "class": "", "function": "absent"}, text) is None


def test_capture_run_records_what_the_test_passes(checkout: Path) -> None:
    callers = [
        {"path": "tests/test_ops.py", "class": "", "function": "test_never_calls"},
        {"path": "tests/test_ops.py", "class": "", "function": "test_vocab_ce"},
    ]
    cap = capture_one(VOCAB_CE, callers, checkout)
    assert cap.status == "captured", cap.reason
    assert cap.caller == "tests/test_ops.py::test_vocab_ce" and len(cap.tried) == 2
    logits = {k: v for k, v in cap.records["2"][1]["logits"].items() if k != "digest"}
    assert logits == {"kind": "tensor", "shape": [16, 4, 20], "dtype": "bfloat16"}
    assert cap.records["4"][0]["logits"]["shape"] == [16, 4, 10]
    assert cap.args["logits"] == {
        "name": "logits",
        "kind": "tensor",
        "shape": [f"16*n//{SMOKE_N}", f"4*n//{SMOKE_N}", f"40*n//{SMOKE_N}//ws"],  # the whole test shape grows
        "dtype": "bfloat16",
    }
    # labels range over the vocabulary the call names (not only the values the test happened to use)
    assert cap.args["target"]["dtype"] == "int64" and cap.args["target"]["high"] == f"40*n//{SMOKE_N}"
    # the test gives every rank the same labels (arange), its own logits (each rank its seed)
    assert cap.args["target"]["replicated"] is True
    assert cap.args["vocab_size"] == {"name": "vocab_size", "kind": "int", "expr": f"40*n//{SMOKE_N}"}


def test_capture_of_a_module_forward(checkout: Path) -> None:
    cap = capture_one(
        ROW_FORWARD, [{"path": "tests/test_ops.py", "class": "TestRow", "function": "test_forward"}], checkout
    )
    assert cap.status == "captured", cap.reason
    assert cap.args["x"]["shape"] == [f"12*n//{SMOKE_N}", f"32*n//{SMOKE_N}"]


def test_a_caller_that_never_calls_the_entry_is_reported(checkout: Path) -> None:
    cap = capture_one(VOCAB_CE, [{"path": "tests/test_ops.py", "class": "", "function": "test_never_calls"}], checkout)
    assert cap.status == "not_reached" and "returned first" in cap.reason


def test_captured_arguments_come_first_in_the_initial_spec() -> None:
    got = {"name": "target", "kind": "tensor", "shape": ["16*n//8"], "dtype": "int64", "high": "40*n//8"}
    cand = {**VOCAB_CE, "captured": {"caller": "tests/t.py::test_x", "args": {"target": got}}}
    spec, changed = evidence_spec(cand)
    assert next(a for a in spec["args"] if a["name"] == "target") == got
    assert changed["target"].endswith("by capture tests/t.py::test_x")
    assert next(a for a in spec["args"] if a["name"] == "logits") != got  # the others keep their guesses


def test_recorder_binds_arguments_and_stops_the_caller() -> None:
    got: dict = {}
    ns = {"f": lambda a, b, c=1: None}
    assert install(ns, "f", "function", ["a", "b", "c"], got) == 1
    with pytest.raises(Captured):
        ns["f"](torch.zeros(2, 3, dtype=torch.int32) + 5, [1, 2], c=torch.float16)
    assert got["args"]["a"].pop("digest") == describe(torch.zeros(2, 3, dtype=torch.int32) + 5)["digest"]
    assert got["args"] == {
        "a": {"kind": "tensor", "shape": [2, 3], "dtype": "int32", "min": 5, "max": 5},
        "b": {"kind": "ints", "value": [1, 2]},
        "c": {"kind": "dtype", "value": "float16"},
    }
    # Captured is no Exception: a test's own `except Exception` does not swallow it
    assert not issubclass(Captured, Exception)


def test_recorder_on_an_autograd_function() -> None:
    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

    got: dict = {}
    assert install({"Fn": Fn}, "Fn.forward", "autograd_function", ["x"], got) == 1
    with pytest.raises(Captured):
        Fn.apply(torch.ones(3))
    assert got["args"]["x"]["shape"] == [3]


def test_describe_keeps_only_the_kind_of_objects() -> None:
    assert describe(object()) == {"kind": "object", "type": "object"}
    assert describe(torch.nn.Linear(2, 2)) == {"kind": "module", "type": "Linear"}
    assert describe([torch.ones(1), 2])["kind"] == "seq"


def _observe(expr: str, wss: tuple[int, ...] = (2, 4)) -> dict[tuple[int, int], int]:
    return {(ws, r): _mg_eval(expr, SMOKE_N, ws, r) for ws in wss for r in range(ws)}


@given(
    st.sampled_from(["{a}", "{a}*n//8//ws", "{a}*n//8*ws", "rank", "ws", "{a}+{b}*rank"]),
    st.integers(1, 4096),
    st.integers(1, 64),
)
def test_fitted_sizes_reproduce_every_observed_value(form: str, a: int, b: int) -> None:
    seen = _observe(form.format(a=a, b=b))
    expr = fit_int(seen)
    assert expr is not None
    assert all(_mg_eval(expr, SMOKE_N, ws, r) == v for (ws, r), v in seen.items())


@given(st.integers(2, 12_500).map(lambda k: 4 * k))
def test_a_sharded_total_scales_with_n_and_keeps_its_relation(total: int) -> None:
    expr = fit_int(_observe(f"{total}//ws"))
    assert expr is not None
    # at four times the smoke size each shard is a quarter of a total four times larger
    assert _mg_eval(expr, 4 * SMOKE_N, 4, 0) == (4 * total) // 4


def test_values_equal_on_every_rank_are_drawn_once() -> None:
    same = {"kind": "tensor", "shape": [4], "dtype": "int64", "min": 0, "max": 3, "digest": "d1"}
    shared = {2: [same, same], 4: [same] * 4}
    assert fit_arg("labels", shared)["replicated"] is True
    apart = {2: [same, {**same, "digest": "d2"}], 4: [same] * 4}
    assert "replicated" not in fit_arg("labels", apart)
    assert "replicated" not in fit_arg("x", {2: [{k: v for k, v in same.items() if k != "digest"}] * 2})


def test_inconsistent_records_are_not_fitted() -> None:
    assert fit_int({(2, 0): 3, (2, 1): 7, (4, 0): 1, (4, 1): 2, (4, 2): 9, (4, 3): 4}) is None
    mixed = {2: [{"kind": "int", "value": 1}, {"kind": "tensor", "shape": [1], "dtype": "float32"}]}
    assert fit_arg("x", mixed) is None
    assert fit_arg("g", {2: [{"kind": "group"}, {"kind": "group"}]}) is None  # groups stay the harness's
    assert fit_args({}) == {}


def test_load_keeps_the_last_line_of_each_candidate_if_captured(tmp_path: Path, capsys) -> None:
    path = tmp_path / "captured.jsonl"
    lines = [
        {"id": "a", "status": "captured", "args": {}},
        {"id": "b", "status": "captured", "args": {}},
        {"id": "b", "status": "not_reached"},  # tried again: the later line wins
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"id": "c", "sta')  # a killed run's torn line
    assert set(load(path)) == {"a"}
    assert "captured.jsonl:4: moved an unreadable line" in capsys.readouterr().err
    assert load(tmp_path / "absent.jsonl") == {}


def _result(accepted: bool, args: list[dict]) -> dict:
    return {"accepted": accepted, "spec": {"args": args}, "reason": ""}


def test_a_capture_the_search_mutated_away_falls_back_to_the_guesses() -> None:
    got = {"name": "target", "kind": "tensor", "shape": ["8*n//8", "4*n//8"], "dtype": "int64", "high": "40*n//8"}
    cand = {**VOCAB_CE, "captured": {"caller": "tests/t.py::test_x", "args": {"target": got}}}
    plain = _result(True, [{"name": "target", "kind": "tensor", "shape": ["n", "n"]}])
    kept = _with_capture(cand, _result(True, [{**got, "keyword": True}]), lambda c: pytest.fail("no second search"))
    assert kept["captured"] == "tests/t.py::test_x"
    mutated = _with_capture(cand, _result(True, [{**got, "shape": ["n"]}]), lambda c: plain)
    assert mutated["spec"] == plain["spec"] and mutated["captured"] == "dropped (mutated away)"
    searched: list[dict] = []
    rejected = _with_capture(cand, _result(False, [got]), lambda c: searched.append(c) or _result(False, []))
    assert searched == [VOCAB_CE] and rejected["captured"] == "dropped (not accepted)"  # the guesses had a try


class _Missing:
    """What an import the harness cannot have is in a task module (runtime `_MgMissing`): any use fails."""

    def __init__(self, name: str) -> None:
        self._mg_name = name

    def __getattr__(self, attr: str):
        raise ImportError(f"mgbench-missing-import: {self._mg_name}")

    def __call__(self, *a, **k):
        raise ImportError(f"mgbench-missing-import: {self._mg_name}")


_Missing.__name__ = "_MgMissing"


def test_recorder_behind_a_module_import_the_harness_could_not_have() -> None:
    got: dict = {}
    ns = {"mappings": _Missing("megatron.core.tensor_parallel.mappings"), "other": _Missing("numpy")}
    places = install(ns, "reduce_scatter", "function", ["x"], got, "megatron.core.tensor_parallel.mappings")
    assert places == 1
    with pytest.raises(Captured):
        ns["mappings"].reduce_scatter(torch.ones(4, 2))
    assert got["args"]["x"]["shape"] == [4, 2]
    with pytest.raises(ImportError):
        ns["mappings"].something_else  # noqa: B018 - the rest of the module stays missing
    with pytest.raises(ImportError):
        ns["other"]()


def test_recorder_stands_in_for_a_class_that_could_not_be_inlined() -> None:
    got: dict = {}
    ns = {"Linear1D_Row": _Missing("colossalai.legacy.nn.Linear1D_Row")}
    assert install(ns, "Linear1D_Row.forward", "method", ["input_"], got) == 1
    layer = ns["Linear1D_Row"](16, 8, bias=True)  # built with any arguments
    with pytest.raises(Captured):
        layer(torch.ones(3, 16))
    assert {k: v for k, v in got["args"]["input_"].items() if k != "digest"} == {
        "kind": "tensor",
        "shape": [3, 16],
        "dtype": "float32",
    }


def test_capture_run_appends_resumes_and_records_a_broken_candidate(checkout: Path, tmp_path: Path) -> None:
    scrape = tmp_path / "scrape"
    (scrape / "modules").mkdir(parents=True)
    (scrape / "modules" / "c_vocab_ce.py").write_text(textwrap.dedent(OPS))
    good = {**VOCAB_CE, "unique": True, "license_permitted": True, "module_path": "modules/c_vocab_ce.py"}
    broken = {**good, "id": "c_broken", "module_path": "modules/absent.py"}
    (scrape / "candidates.jsonl").write_text("".join(json.dumps(c) + "\n" for c in (good, broken)))
    callers = [{"path": "tests/test_ops.py", "class": "", "function": "test_vocab_ce", "line": 10}]
    (scrape / "evidence.jsonl").write_text(
        "".join(
            json.dumps({"id": i, "params": {}, "sites": 1, "callers": callers}) + "\n"
            for i in ("c_vocab_ce", "c_broken")
        )
    )
    dest = run(scrape, checkout.parent, jobs=1, quiet=True)
    rows = {json.loads(line)["id"]: json.loads(line) for line in dest.read_text().splitlines()}
    assert rows["c_vocab_ce"]["status"] == "captured"
    assert rows["c_broken"]["status"] == "error" and "absent.py" in rows["c_broken"]["reason"]
    run(scrape, checkout.parent, jobs=1, quiet=True)  # a re-run resumes: nothing is captured twice
    assert len(dest.read_text().splitlines()) == 2
    assert refit(dest) == 1  # fitting the kept records again needs no new runs
    assert summary(dest).startswith("2 candidates with test callers: ") and "captured 1" in summary(dest)


def test_recorder_leaves_library_functions_of_the_same_name_alone() -> None:
    import functools

    ns = {"reduce": functools.reduce, "functools": functools}
    assert install(ns, "reduce", "function", ["x"], {}, "pkg.ops") == 0
    assert ns["reduce"] is functools.reduce and functools.reduce.__module__ == "_functools"


def test_an_axis_beside_a_dimension_of_the_same_size_stays_an_axis() -> None:
    rec = {"x": {"kind": "tensor", "shape": [2, 16], "dtype": "float32"}, "dim": {"kind": "int", "value": 0}}
    heads = {**rec, "heads": {"kind": "int", "value": 2}, "dim": {"kind": "int", "value": 1}}
    got = fit_args({2: [heads, heads], 4: [heads] * 4})
    assert got["dim"]["expr"] == "1" and got["heads"]["expr"] == f"2*n//{SMOKE_N}"
