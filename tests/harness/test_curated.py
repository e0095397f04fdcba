"""The curated input registry: loading, errors, expressions, matching, and its use by the harness and gate."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.scrapers.harness.curated import RegistryError, default, load
from mgbench.scrapers.harness.curated.exprs import ExprError, evaluate, substitute
from mgbench.scrapers.harness.driver import _with_curated
from mgbench.scrapers.harness.inputs.initial import first_spec
from mgbench.scrapers.harness.run.settle import choose_n
from mgbench.scrapers.level4.gate import GateContext, GateItem, check_task, review_of

CONFIGS = """
toy:
  source: "a toy configuration for tests"
  dims: {hidden: 64, vocab: 96}
"""


def _registry(tmp_path: Path, body: str, configs: str = CONFIGS) -> Path:
    (tmp_path / "entries").mkdir(exist_ok=True)
    (tmp_path / "configs.yaml").write_text(configs)
    (tmp_path / "entries" / "owner+repo.yaml").write_text(body)
    return tmp_path


def _load(tmp_path: Path, body: str):
    root = _registry(tmp_path, body)
    return load(root / "entries", root / "configs.yaml")


GOOD = """
repo: owner/repo
entries:
  - qualname: vocab_ce
    path: pkg/loss.py
    verdict: ship
    why: vocab-parallel cross-entropy
    config: toy
    full_n: 512
    args:
      logits: {kind: tensor, shape: [n, vocab//ws], dtype: bfloat16}
      target: {kind: tensor, shape: [n], dtype: int64, high: vocab, replicated: true}
      smoothing: {kind: float, value: 0.1}
  - qualname: vocab_ce
    verdict: skip
    why: any other copy is a test helper
  - qualname: Mlp.forward
    verdict: ship
    why: a TP MLP
    config: toy
    full_n: 64
    attrs:
      weight: {kind: tensor, shape: [hidden, 4*hidden//ws], dtype: bfloat16, replicated: true}
    args:
      x: {kind: tensor, shape: [n, hidden], dtype: bfloat16}
"""


def _cand(qualname: str, path: str = "pkg/loss.py", repo: str = "owner/repo", params=None, kind="function"):
    return {
        "id": "c1",
        "entry": qualname.split(".")[-1],
        "qualname": qualname,
        "kind": kind,
        "provenance": {"repo": repo, "path": path},
        "params": params if params is not None else [],
    }


def test_configuration_names_become_numbers(tmp_path):
    reg = _load(tmp_path, GOOD)
    ce = reg.match(_cand("vocab_ce"))
    assert ce.verdict == "ship" and ce.full_n == 512
    assert ce.args["logits"]["shape"] == ["n", "96 // ws"]
    assert ce.args["target"]["high"] == "96" and ce.args["target"]["replicated"] is True
    assert reg.match(_cand("Mlp.forward")).attrs["weight"]["shape"] == ["64", "4 * 64 // ws"]


def test_the_most_specific_path_wins_and_other_repositories_do_not_match(tmp_path):
    reg = _load(tmp_path, GOOD)
    assert reg.match(_cand("vocab_ce")).verdict == "ship"
    assert reg.match(_cand("vocab_ce", path="tests/test_loss.py")).verdict == "skip"
    assert reg.match(_cand("vocab_ce", repo="other/repo")) is None
    assert reg.match(_cand("unknown")) is None


@pytest.mark.parametrize(
    "change, message",
    [
        ("shape: [n, vocab//ws]", "shape: [n, vocab//missing]"),
        ("verdict: skip", "verdict: maybe"),
        ("config: toy\n    full_n: 512", "config: nope\n    full_n: 512"),
        ("full_n: 512", "full_n: 2"),
        ("shape: [n, vocab//ws]", "shape: [n, vocab//(ws-2)]"),
        ("shape: [n, vocab//ws]", "shape: [n, hidden//ws - 16]"),
        ("dtype: bfloat16}", "dtype: bfloat16, colour: red}"),
        ("why: vocab-parallel cross-entropy", "why: ''"),
        ("shape: [n, vocab//ws]", "shape: [n, __import__('os')]"),
        ("dtype: bfloat16}", "dtype: bfloat16, draw: lognormal}"),
        ("dtype: bfloat16}", "dtype: bfloat16, fill: n*vocab//missing}"),
    ],
)
def test_a_bad_entry_is_one_line_naming_file_entry_and_reason(tmp_path, change, message):
    assert change in GOOD
    with pytest.raises(RegistryError) as e:
        _load(tmp_path, GOOD.replace(change, message, 1))
    text = str(e.value)
    label = "entry 1 (vocab_ce)" if change == "verdict: skip" else "entry 0 (vocab_ce)"
    assert "\n" not in text and "owner+repo.yaml" in text and label in text


def test_an_entry_listed_twice_and_a_broken_file_are_errors(tmp_path):
    twice = GOOD + GOOD.split("entries:\n", 1)[1]
    with pytest.raises(RegistryError, match="listed twice"):
        _load(tmp_path, twice)
    with pytest.raises(RegistryError, match="cannot be read as YAML"):
        _load(tmp_path, "repo: [unclosed")
    with pytest.raises(RegistryError, match="`repo: owner/name`"):
        _load(tmp_path, "entries: []")


def test_the_check_command_exits_1_with_the_reason(tmp_path):
    root = _registry(tmp_path, GOOD.replace("verdict: skip", "verdict: maybe"))
    cmd = [sys.executable, "-m", "mgbench.scrapers.harness.curated", "--entries", str(root / "entries")]
    bad = subprocess.run(cmd + ["--configs", str(root / "configs.yaml")], capture_output=True, text=True)
    assert bad.returncode == 1 and "verdict must be one of" in bad.stderr and len(bad.stderr.splitlines()) == 1
    root = _registry(tmp_path, GOOD)
    ok = subprocess.run(cmd + ["--configs", str(root / "configs.yaml")], capture_output=True, text=True)
    assert ok.returncode == 0 and "3 entries (2 ship, 1 skip)" in ok.stdout


def test_the_shipped_registry_loads_and_every_ship_entry_names_a_configuration():
    reg = default()
    assert reg.entries, "the registry ships entries"
    for e in reg.entries:
        assert e.why
        if e.verdict == "ship":
            assert e.config in reg.configs and (e.args or e.attrs)


_DIMS = {"hidden": 4096, "vocab": 128256, "heads": 32}
_ATOMS = st.sampled_from(["n", "ws", "rank", "hidden", "vocab", "heads", "2", "7"])


@st.composite
def _exprs(draw, depth: int = 2):
    if depth == 0 or draw(st.booleans()):
        return draw(_ATOMS)
    op = draw(st.sampled_from(["+", "*", "//", "-"]))
    return f"({draw(_exprs(depth=depth - 1))} {op} {draw(_exprs(depth=depth - 1))})"


@settings(max_examples=200, deadline=None)
@given(_exprs(), st.sampled_from([8, 1024]), st.sampled_from([2, 4, 8]))
def test_substitution_computes_what_the_names_would(expr, n, ws):
    plain = substitute(expr, _DIMS)
    assert not set(_DIMS) & set(plain.replace("(", " ").replace(")", " ").split())
    try:
        want = eval(expr, {"__builtins__": {}}, {**_DIMS, "n": n, "ws": ws, "rank": 1})  # noqa: S307
    except ZeroDivisionError:
        with pytest.raises(ZeroDivisionError):
            evaluate(plain, n, ws, 1)
        return
    assert evaluate(plain, n, ws, 1) == want


def test_substitution_refuses_what_is_not_integer_arithmetic():
    for bad in ("n / 2", "n.bit_length()", "[n]", "1.5 * n", "True", "open"):
        with pytest.raises(ExprError):
            substitute(bad, _DIMS)


def test_curated_arguments_replace_the_guesses_and_set_the_full_size(tmp_path):
    reg = _load(tmp_path, GOOD)
    params = [
        {"name": "logits", "kind": "positional"},
        {"name": "target", "kind": "positional"},
        {"name": "smoothing", "kind": "positional", "default": "0.0"},
    ]
    cand = {**_cand("vocab_ce", params=params), "curated": reg.match(_cand("vocab_ce")).pinned()}
    spec, changed = first_spec(cand)
    by = {a["name"]: a for a in spec["args"]}
    assert by["logits"]["dtype"] == "bfloat16" and by["logits"]["shape"] == ["n", "96 // ws"]
    assert by["target"]["dtype"] == "int64" and by["target"]["high"] == "96"
    assert by["smoothing"] == {"name": "smoothing", "kind": "float", "value": 0.1, "keyword": True}
    assert spec["curated_n"] == 512 and "curated owner/repo:vocab_ce@pkg/loss.py" in changed["logits"]
    mlp = {
        **_cand(
            "Mlp.forward",
            params=[{"name": "self", "kind": "positional"}, {"name": "x", "kind": "positional"}],
            kind="method",
        ),
        "curated": reg.match(_cand("Mlp.forward")).pinned(),
    }
    spec, _ = first_spec(mlp)
    assert [a["name"] for a in spec["attrs"]] == ["weight"] and spec["args"][0]["shape"] == ["n", "64"]


def test_an_autograd_function_gets_the_curated_arguments_in_entry_order(tmp_path):
    reg = _load(tmp_path, GOOD)
    cand = {**_cand("vocab_ce", kind="autograd_function"), "curated": reg.match(_cand("vocab_ce")).pinned()}
    spec, _ = first_spec(cand)
    assert [a["name"] for a in spec["args"]] == ["logits", "target", "smoothing"]
    assert not any(a.get("keyword") for a in spec["args"])


def _res(accepted: bool, args: list[dict], reason: str = "") -> dict:
    return {"accepted": accepted, "reason": reason, "spec": {"args": args, "attrs": []}}


def test_curated_inputs_stay_only_when_accepted_unchanged(tmp_path):
    pin = _load(tmp_path, GOOD).match(_cand("vocab_ce")).pinned()
    cand = {"curated": pin}
    args = [dict(a) for a in pin["args"].values()]
    kept, rec = _with_curated(cand, (_res(True, args), "inline"), lambda: pytest.fail("no fallback search"))
    assert kept["curated"] == pin["id"] and rec == "inline"
    plain = (_res(True, []), "plain-inline")
    mutated = _with_curated(cand, (_res(True, [{**args[0], "shape": ["n"]}, *args[1:]]), "x"), lambda: plain)
    assert mutated[0]["curated"] == "dropped (mutated away: logits)" and mutated[1] == "plain-inline"
    rejected, _ = _with_curated(cand, (_res(False, args, "search_exhausted: no"), "x"), lambda: plain)
    assert rejected["curated"].startswith("dropped (not accepted: search_exhausted")


def test_settling_verifies_the_curated_full_size_and_halves_it_on_failure():
    spec = {"args": [{"name": "x", "kind": "tensor", "shape": ["n", "4096"], "dtype": "bfloat16"}], "curated_n": 4096}
    seen: list[int] = []

    def run(n: int):
        seen.append(n)
        return ("ok" if n <= 2048 else "timeout"), []

    assert choose_n(spec, run)["n_full"] == 2048 and seen == [4096, 2048]


def test_the_reviewed_gate_ships_only_a_ship_entry_whose_inputs_were_used(tmp_path):
    reg = _load(tmp_path, GOOD)
    ship, skip = reg.match(_cand("vocab_ce")), reg.match(_cand("vocab_ce", path="tests/t.py"))
    assert review_of(ship, ship.id) == ""
    assert "not worth solving: any other copy" in review_of(skip, None)
    assert "no reviewed entry" in review_of(None, None)
    assert "were not used: dropped (mutated away" in review_of(ship, "dropped (mutated away: logits)")
    trace = {"status": "ok", "world_size": 2, "ranks": [{"collective_calls": 1}, {"collective_calls": 1}]}
    item = GateItem("t", "c", "h", "owner/repo", "pkg/loss.py", trace=trace, review=review_of(None, None))
    assert check_task(item, GateContext())["reviewed"].startswith("no reviewed entry")
    item.review = None  # the registry not asked (`scrape gate --unreviewed`)
    assert check_task(item, GateContext())["reviewed"] is None
