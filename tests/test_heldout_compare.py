"""benchmarks/heldout_compare.py: two runs of the held-out candidates (gloo and shared-GPU, say) compared
candidate by candidate; a candidate correct in one run and rejected in the other is a difference unless it
is a conditional cheat whose trigger never fired where it was judged correct."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
spec = importlib.util.spec_from_file_location("heldout_compare", REPO / "benchmarks" / "heldout_compare.py")
heldout_compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(heldout_compare)

P = "l1-all_reduce-sum-bw-fp16@"
CORRECT = {"status": "correct", "reason": ""}


def _rejected(rule: str) -> dict:
    return {"status": "incorrect", "reason": f"trial 1/5: rank 0: wrong output (rule {rule})"}


@pytest.mark.parametrize(
    ("a", "b", "how"),
    [
        ((CORRECT, None), (CORRECT, None), "same"),
        ((_rejected("values"), None), (_rejected("values"), None), "same"),
        ((_rejected("values"), None), (_rejected("timed_values"), None), "same verdict"),
        ((CORRECT, False), (_rejected("timed_commit"), True), "unfired"),
        ((_rejected("timed_commit"), True), (CORRECT, False), "unfired"),
        ((CORRECT, True), (_rejected("timed_commit"), True), "differs"),
        ((CORRECT, None), (_rejected("values"), None), "differs"),
        (None, (CORRECT, None), "only B"),
    ],
)
def test_each_pair_of_verdicts_is_classed(a, b, how):
    assert heldout_compare.agreement(a, b) == how


def _write(folder: Path, verdicts: dict[str, dict], fired: dict[str, bool]) -> Path:
    folder.mkdir()
    results = folder / "heldout.jsonl"
    run = {"world_size": 2, "backend": "gloo", "size": "smoke"}
    results.write_text("".join(json.dumps({"sample": P + s + ".py", **run, **v}) + "\n" for s, v in verdicts.items()))
    (folder / "heldout-fired.jsonl").write_text(
        "".join(json.dumps({"sample": P + s + ".py", **run, "fired": f}) + "\n" for s, f in fired.items())
    )
    return results


def test_a_cheat_missed_on_one_run_fails_the_comparison(tmp_path, capsys):
    a = _write(tmp_path / "a", {"nan_all": _rejected("nan"), "fused_deferred": _rejected("timed_commit")}, {})
    b = _write(tmp_path / "b", {"nan_all": _rejected("nan"), "fused_deferred": CORRECT}, {"fused_deferred": True})
    assert heldout_compare.main([str(a), str(b), "--names", "gloo", "shared-gpu"]) == 1
    out = capsys.readouterr().out
    assert "gloo" in out and "shared-gpu" in out
    assert "1 same, 1 differs (of 2)" in out


def test_an_unfired_trigger_is_no_difference(tmp_path, capsys):
    a = _write(tmp_path / "a", {"fused_deferred": _rejected("timed_commit")}, {"fused_deferred": True})
    b = _write(tmp_path / "b", {"fused_deferred": CORRECT}, {"fused_deferred": False})
    assert heldout_compare.main([str(a), str(b)]) == 0
    assert "1 unfired (of 1)" in capsys.readouterr().out


def test_a_file_that_is_not_heldout_results_is_one_clear_line(tmp_path, capsys):
    bad = tmp_path / "records.jsonl"
    bad.write_text(json.dumps({"task_id": "t", "status": "passed"}) + "\n")
    good = _write(tmp_path / "a", {"nan_all": _rejected("nan")}, {})
    assert heldout_compare.main([str(good), str(bad)]) == 2
    assert "records.jsonl: a line with no sample or status" in capsys.readouterr().err
    assert heldout_compare.main([str(good), str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl: no such results file" in capsys.readouterr().err
