"""Call-site evidence from a repository checkout (scrapers/harness/inputs/discovery/callsites.py): what
callers and tests pass, the cached evidence.jsonl and its errors, and the expressions it leads to (uneven
splits, rank arguments)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mgbench.scrapers.harness.inputs.discovery import evidence_args
from mgbench.scrapers.harness.inputs.discovery.callsites import build, clues_of, load
from mgbench.scrapers.harness.inputs.discovery.evidence import EvidenceError
from mgbench.scrapers.harness.inputs.discovery.evidence_args import RANK_NAME, UNEVEN_SPLITS, UNEVEN_TOTAL
from mgbench.scrapers.harness.inputs.initial import initial_spec

OPS = """
def gather_seq(x, mode, use_fp8, splits, attn):
    return x
"""
LAYER = """
import torch
from pkg.ops import gather_seq

def forward(idx):
    h = torch.randn(4, 8, 16, dtype=torch.bfloat16)
    counts = torch.bincount(idx).tolist()
    return gather_seq(h, ParallelMode.SEQUENCE, True, counts, lambda q, k, v: q)
"""
TEST = """
import torch
from pkg import ops

def test_gather():
    ops.gather_seq(torch.empty(2, 3, 4), ParallelMode.SEQUENCE, use_fp8=True, splits=[1, 2], attn=None)
"""
UNRELATED = """
def gather_seq(a):  # another function of the same name, not imported from pkg.ops
    return a

def other():
    return gather_seq(1.5)
"""
OTHER_IMPORT = """
from functools import reduce as gather_seq  # the same name from elsewhere

def g():
    return gather_seq(max, [1.5])
"""
REEXPORT = """
from pkg.reexport import gather_seq  # pkg/reexport.py imports it from pkg.ops

def side(h):
    return gather_seq(h, ParallelMode.SEQUENCE, True, [3, 1], None)
"""
RELATIVE = """
from .ops import gather_seq

def backward(h):
    return gather_seq(h, ParallelMode.SEQUENCE, False, [2, 2], None)
"""


def _repo(tmp_path: Path) -> tuple[Path, Path, dict]:
    src, scrape = tmp_path / "src", tmp_path / "scrape"
    for rel, text in {
        "pkg/__init__.py": "",
        "pkg/ops.py": OPS,
        "pkg/layer.py": LAYER,
        "tests/test_ops.py": TEST,
        "tools/unrelated.py": UNRELATED,
        "tools/other.py": OTHER_IMPORT,
        "pkg/sub/__init__.py": "",
        "pkg/back.py": RELATIVE,
        "pkg/reexport.py": "from pkg.ops import gather_seq\n",
        "tools/side.py": REEXPORT,
    }.items():
        (src / "repo" / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / "repo" / rel).write_text(textwrap.dedent(text))
    (scrape / "modules").mkdir(parents=True)
    (scrape / "modules" / "c1.py").write_text(textwrap.dedent(OPS))
    names = ["x", "mode", "use_fp8", "splits", "attn"]
    cand = {
        "id": "c1",
        "entry": "gather_seq",
        "kind": "function",
        "qualname": "gather_seq",
        "params": [{"name": p, "kind": "positional", "annotation": None, "default": None} for p in names],
        "provenance": {"repo": "o/repo", "path": "pkg/ops.py"},
        "module_path": "modules/c1.py",
        "unique": True,
        "license_permitted": True,
    }
    (scrape / "candidates.jsonl").write_text(json.dumps(cand) + "\n")
    return src, scrape, cand


def test_call_sites_and_tests_give_kinds_ranks_and_dtypes(tmp_path):
    src, scrape, cand = _repo(tmp_path)
    rec = load(build(scrape, src))["c1"]
    # the callers (by a relative import, by a re-export beside the module) and the test; not the other
    # functions of the same name
    assert rec["sites"] == 4
    clues = clues_of(rec)
    x = {(c.source.split()[0], c.ndim, c.dtype) for c in clues["x"]}
    assert x == {("call_site", 3, "bfloat16"), ("test", 3, None)}
    assert {c.value for c in clues["mode"]} == {"SEQUENCE"}
    assert [c.value for c in clues["use_fp8"]].count(True) == 3 and len(clues["use_fp8"]) == 4
    assert any(c.kind == "splits" and c.uneven for c in clues["splits"])
    assert any(c.kind == "callable" and c.arity == 3 for c in clues["attn"])
    assert rec["file_bf16"] is True  # a caller draws bf16


def test_call_site_evidence_shapes_the_initial_spec(tmp_path):
    src, scrape, cand = _repo(tmp_path)
    rec = load(build(scrape, src))["c1"]
    text = (scrape / "modules" / "c1.py").read_text()
    plain = {a["name"]: a for a in initial_spec(cand, text)["args"]}
    assert plain["x"]["kind"] == "tensor" and plain["x"]["shape"] == ["n", "n"]  # no evidence: the role default
    a = {a["name"]: a for a in initial_spec({**cand, "evidence": rec}, text)["args"]}
    # rank 3 from the call site; the uneven splits cut its first dimension, which takes their total
    assert a["x"]["shape"] == [UNEVEN_TOTAL, "n", "n"] and a["x"]["dtype"] == "bfloat16"
    assert a["mode"] == {"name": "mode", "kind": "const", "value": "SEQUENCE"}
    assert a["use_fp8"] == {"name": "use_fp8", "kind": "bool", "value": True}
    assert a["attn"] == {"name": "attn", "kind": "fn", "value": "scaled_dot_product_attention"}
    assert a["splits"] == {"name": "splits", "kind": "splits", "expr": UNEVEN_SPLITS}


def test_the_cache_round_trips(tmp_path):
    src, scrape, _ = _repo(tmp_path)
    path = build(scrape, src)
    rec = load(path)["c1"]
    again = tmp_path / "again.jsonl"
    again.write_text(json.dumps({**rec, "params": {k: [c.to_dict() for c in v] for k, v in clues_of(rec).items()}}))
    assert clues_of(load(again)["c1"]) == clues_of(rec)
    assert load(tmp_path / "missing.jsonl") == {}


@pytest.mark.parametrize(
    "line, why",
    [
        ("{not json", "line 2: not JSON"),
        ('{"id": "c2", "params": []}', "line 2: 'params' is not an object"),
        ('{"id": "c2", "params": {"x": [{"ndim": 2}]}}', "line 2: parameter 'x': clues must be objects"),
        ('["c2"]', "line 2: not an object with a string 'id'"),
    ],
)
def test_a_bad_cache_line_is_one_clear_error(tmp_path, line, why):
    path = tmp_path / "evidence.jsonl"
    path.write_text('{"id": "c1", "params": {}}\n' + line + "\n")
    with pytest.raises(EvidenceError, match=f"evidence.jsonl {why}"):
        load(path)


def test_the_harness_command_reports_a_bad_cache_in_one_line(tmp_path, capsys):
    from mgbench.cli import main

    (tmp_path / "candidates.jsonl").write_text("")
    (tmp_path / "evidence.jsonl").write_text("{oops\n")
    assert main(["scrape", "harness", "--out", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "evidence.jsonl line 1: not JSON" in err[0]


@given(st.integers(1, 16), st.integers(1, 64))
def test_uneven_splits_agree_between_ranks(ws, n):
    """What rank r sends to i is what i expects from r, and every rank's splits sum to the same total, as
    the task runtime draws them (and as the buffers they cut are sized)."""
    from mgbench.scrapers.harness.make.runtime import _mg_eval, _mg_value

    arg = {"name": "splits", "kind": "splits", "expr": UNEVEN_SPLITS}
    s = [_mg_value(arg, 0, 0, r, ws, n, "cpu") for r in range(ws)]
    assert sum(s[0]) == _mg_eval(UNEVEN_TOTAL, n, ws, 0)
    assert all(s[r][i] == s[i][r] for r in range(ws) for i in range(ws))
    assert len({sum(row) for row in s}) == 1 and sum(s[0]) == ws * n + ws * (ws - 1) // 2
    assert ws == 1 or len(set(s[0])) > 1


@given(st.integers(1, 16))
def test_rank_expressions_stay_in_range(ws):
    for expr in [e for _, e in RANK_NAME] + ["(rank^1)%ws"]:
        assert all(0 <= eval(expr, {}, {"ws": ws, "rank": r}) < ws for r in range(ws)), expr


def test_uneven_splits_resize_the_buffers_they_cut():
    args = [
        {"name": "inp", "kind": "tensor", "shape": ["n*ws", "n"], "dtype": "float32"},
        {"name": "w", "kind": "tensor", "shape": ["ws", "n"], "dtype": "float32"},
        {"name": "splits", "kind": "splits", "expr": UNEVEN_SPLITS},
    ]
    assert evidence_args.split_buffers(args) == ["inp"]
    assert args[0]["shape"] == [evidence_args.UNEVEN_TOTAL, "n"] and args[1]["shape"] == ["ws", "n"]
    for ws in (2, 4, 8):
        total = eval(evidence_args.UNEVEN_TOTAL, {}, {"n": 8, "ws": ws})
        assert total == sum(eval(UNEVEN_SPLITS, {}, {"n": 8, "ws": ws, "rank": 1, "i": i}) for i in range(ws))


def test_false_and_zero_literals_survive_the_cache(tmp_path):
    from mgbench.scrapers.harness.inputs.discovery.evidence import Clue

    clues = [Clue("bool", "call_site a.py:1", value=False), Clue("int", "test t.py:2", value=0)]
    path = tmp_path / "evidence.jsonl"
    path.write_text(json.dumps({"id": "c", "params": {"p": [c.to_dict() for c in clues]}}) + "\n")
    assert clues_of(load(path)["c"])["p"] == clues
