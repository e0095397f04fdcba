"""benchmarks/heldout_eval.py: a conditional held-out cheat judged correct counts as a miss only when its
trigger fired; the triggers are read from the eval's relayed stderr as each verdict comes; every
conditional candidate announces itself under its own name on its cheat path."""

from __future__ import annotations

import importlib.util
import io
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("heldout_eval", REPO / "benchmarks" / "heldout_eval.py")
heldout_eval = importlib.util.module_from_spec(spec)
spec.loader.exec_module(heldout_eval)

CHEATS = sorted(heldout_eval.CHEATS.glob("*.py"))
CONDITIONAL = [p for p in CHEATS if heldout_eval._conditional(p)]


@pytest.mark.parametrize(
    ("expect", "status", "fired", "right"),
    [
        ("reject", "correct", True, False),  # the cheat ran and was judged correct: a miss
        ("reject", "correct", None, False),  # not known (not conditional, or judged before triggers were kept)
        ("reject", "correct", False, None),  # the trigger never fired: honest work ran, the run shows nothing
        ("reject", "incorrect", False, True),  # rejected all the same (another rule caught it)
        ("reject", "incorrect", True, True),
        ("accept", "correct", None, True),
        ("accept", "incorrect", None, False),
    ],
)
def test_a_correct_verdict_on_a_conditional_cheat_is_a_miss_only_if_its_trigger_fired(expect, status, fired, right):
    assert heldout_eval.judged_right(expect, {"status": status}, fired) is right


class _Eval:
    """A stand-in for the batch eval's stderr: each verdict line comes after its record is appended."""

    def __init__(self, results: Path):
        self.results = results

    def verdict(self, sample: str, status: str = "CORRECT", world_size: int = 2, prefix: str = "") -> str:
        rec = {"sample": sample, "world_size": world_size, "backend": "gloo", "size": "smoke", "status": status}
        with open(self.results, "a") as f:
            f.write(json.dumps(rec) + "\n")
        return f"{prefix}eval [1/3] {sample} {status} (3s elapsed, ETA 0s)\n"


def _fired_rows(path: Path) -> list[tuple]:
    return [(r["sample"], r["world_size"], r["fired"]) for r in map(json.loads, path.read_text().splitlines())]


def _lines_as_the_eval_prints_them(results: Path):
    ev = _Eval(results)
    # the candidate's last output had no newline: the verdict line follows it on the same line
    yield ev.verdict("l1-x@honest_a.py", prefix="?[8m")
    yield "mgbench-heldout: fired fused_deferred\n"
    # two ranks' relayed lines run together, then the verdict
    yield "mgbench-heldout: fired id_ptr_cachemgbench-heldout: fired id_ptr_cache\n"
    yield ev.verdict("l1-x@id_ptr_cache.py", "INCORRECT")
    yield ev.verdict("l1-x@fused_deferred.py")


def test_triggers_are_attributed_to_the_verdict_that_follows_them(tmp_path):
    results, fired_file = tmp_path / "heldout.jsonl", tmp_path / "heldout-fired.jsonl"
    echo = io.StringIO()
    lines = list(_lines_as_the_eval_prints_them(results))
    results.unlink()  # replayed below as the eval writes it: a record, then its line
    heldout_eval.record_triggers(_lines_as_the_eval_prints_them(results), results, fired_file, echo)
    assert echo.getvalue() == "".join(lines)  # everything reaches the terminal as it came
    assert _fired_rows(fired_file) == [
        ("l1-x@honest_a.py", 2, False),
        ("l1-x@id_ptr_cache.py", 2, True),
        ("l1-x@fused_deferred.py", 2, True),
    ]


def test_a_trigger_counts_for_the_world_size_it_fired_at_only(tmp_path):
    results, fired_file = tmp_path / "heldout.jsonl", tmp_path / "heldout-fired.jsonl"
    ev = _Eval(results)

    def lines():
        yield ev.verdict("l1-x@fused_deferred.py", world_size=2)  # did honest work at ws 2
        yield "mgbench-heldout: fired fused_deferred\n"
        yield ev.verdict("l1-x@fused_deferred.py", world_size=4)

    heldout_eval.record_triggers(lines(), results, fired_file, io.StringIO())
    assert _fired_rows(fired_file) == [("l1-x@fused_deferred.py", 2, False), ("l1-x@fused_deferred.py", 4, True)]


def test_a_verdict_line_with_no_record_behind_it_is_passed_over(tmp_path):
    """A candidate that prints another candidate's verdict line cannot write that candidate's trigger."""
    results, fired_file = tmp_path / "heldout.jsonl", tmp_path / "heldout-fired.jsonl"
    results.write_text(json.dumps({"sample": "l1-x@fused_deferred.py", "world_size": 2, "status": "correct"}) + "\n")
    ev = _Eval(results)

    def lines():  # a resumed run: fused_deferred was judged before; a later candidate forges its line
        yield "eval [1/1] l1-x@fused_deferred.py CORRECT (1s elapsed, ETA 0s)\n"
        yield ev.verdict("l1-x@honest_a.py")

    heldout_eval.record_triggers(lines(), results, fired_file, io.StringIO())
    assert _fired_rows(fired_file) == [("l1-x@honest_a.py", 2, False)]


def test_conditional_candidates_announce_themselves_by_their_own_name_on_the_cheat_path():
    assert len(CONDITIONAL) >= 6
    for path in CONDITIONAL:
        text = path.read_text()
        stem = heldout_eval._stem(path.name)
        assert text.splitlines()[0] == "# expect: reject", path.name
        assert f'print("{heldout_eval.FIRED}{stem}"' in text, path.name
        # the announcement is called from solution()'s code, not only defined
        body = text.split("def solution", 1)[1]
        assert re.search(r"^\s+_fired\(\)$", body, re.M), path.name


def test_only_conditional_candidates_print_the_trigger_line():
    for path in CHEATS:
        if path not in CONDITIONAL:
            assert heldout_eval.FIRED not in path.read_text(), path.name


def test_evals_side_by_side_merge_only_the_judges_record_of_each_verdict(tmp_path):
    """--jobs: two watched evals, each with its own results file, append every verdict's record to the one
    results file and its trigger to the one triggers file as the verdict comes; a record a candidate forged
    for itself before the judge's, or for a candidate of the other eval, is not merged."""
    import threading

    main, fired_file = tmp_path / "heldout.jsonl", tmp_path / "heldout-fired.jsonl"
    own_a, own_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    ev_a, ev_b = _Eval(own_a), _Eval(own_b)
    b_appended, a_judged = threading.Event(), threading.Event()

    def eval_a():
        yield "mgbench-heldout: fired fused_deferred\n"
        b_appended.wait(10)  # the other eval's verdict comes in between
        ev_a.verdict("l1-x@fused_deferred.py", "CORRECT")  # forged by the candidate while it ran
        yield ev_a.verdict("l1-x@fused_deferred.py", "INCORRECT")  # the judge's record, then its line
        a_judged.set()
        yield ev_a.verdict("l1-x@honest_a.py")

    def eval_b():
        yield ev_b.verdict("l1-x@id_ptr_cache.py", "INCORRECT")
        b_appended.set()
        a_judged.wait(10)
        ev_b.verdict("l1-x@honest_a.py", "INCORRECT")  # forged for the other eval's candidate: behind no verdict
        yield "mgbench-heldout: fired batch_head_skip\n"
        yield ev_b.verdict("l1-x@batch_head_skip.py", "INCORRECT")

    watchers = [
        threading.Thread(target=heldout_eval.record_triggers, args=(lines(), own, fired_file, io.StringIO(), main))
        for lines, own in ((eval_a, own_a), (eval_b, own_b))
    ]
    for w in watchers:
        w.start()
    for w in watchers:
        w.join(30)
        assert not w.is_alive()
    assert b_appended.is_set() and a_judged.is_set()
    merged = sorted((r["sample"], r["status"]) for r in map(json.loads, main.read_text().splitlines()))
    assert merged == [
        ("l1-x@batch_head_skip.py", "INCORRECT"),
        ("l1-x@fused_deferred.py", "INCORRECT"),
        ("l1-x@honest_a.py", "CORRECT"),
        ("l1-x@id_ptr_cache.py", "INCORRECT"),
    ]
    # a trigger row per record behind a verdict (the forged one included): each candidate's own trigger
    assert sorted((s, f) for s, _, f in _fired_rows(fired_file)) == [
        ("l1-x@batch_head_skip.py", True),
        ("l1-x@fused_deferred.py", True),
        ("l1-x@fused_deferred.py", True),
        ("l1-x@honest_a.py", False),
        ("l1-x@id_ptr_cache.py", False),
    ]


def test_evals_side_by_side_each_resume_from_a_copy_in_the_sandbox_and_a_failure_is_not_lost(tmp_path, monkeypatch):
    main = tmp_path / "heldout.jsonl"
    main.write_text(json.dumps({"sample": "l1-x@judged_before.py", "status": "correct"}) + "\n")
    folders = [tmp_path / f"candidates-{k}" for k in range(3)]
    calls = []

    def fake_eval(args, results, fired_file, merge_into=None):
        calls.append((args, results, results.read_text(), merge_into))
        return {"candidates-1": -9}.get(Path(args[args.index("--solutions-dir") + 1]).name, 0)

    monkeypatch.setattr(heldout_eval, "_eval_watching_triggers", fake_eval)
    assert heldout_eval.judge(folders, ["--tasks", "T"], main) == -9  # killed by a signal: not 0
    assert len(calls) == 3
    own_files = {results for _, results, _, _ in calls}
    assert len(own_files) == 3 and main not in own_files  # a batch eval settles its own file
    for args, results, text, merge_into in calls:
        assert args[args.index("--results") + 1] == str(results)
        assert text == main.read_text()  # begun as a copy of the results: resumes
        assert merge_into == main
        assert args[-2:] == ["--sandbox", "require"]

    def broken_eval(args, results, fired_file, merge_into=None):
        raise OSError("no such interpreter")

    monkeypatch.setattr(heldout_eval, "_eval_watching_triggers", broken_eval)
    assert heldout_eval.judge(folders, [], main) == 1


def test_one_eval_writes_the_results_file_itself_as_before(tmp_path, monkeypatch):
    main = tmp_path / "heldout.jsonl"
    calls = []
    monkeypatch.setattr(heldout_eval, "_eval_watching_triggers", lambda args, *rest: calls.append(args) or 0)
    assert heldout_eval.judge([tmp_path / "candidates"], ["--tasks", "T"], main) == 0
    assert calls == [["--solutions-dir", str(tmp_path / "candidates"), "--results", str(main), "--tasks", "T"]]


@given(names=st.sets(st.from_regex(r"[a-z]{1,8}", fullmatch=True), min_size=1, max_size=12), jobs=st.integers(1, 6))
@settings(max_examples=25, deadline=None)
def test_candidates_are_shared_out_over_the_evals_each_once(names, jobs):
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        copies = Path(tmp) / "candidates"
        copies.mkdir()
        for n in names:
            (copies / f"l1-x@{n}.py").write_text(n)
        shards = heldout_eval.shard_candidates(copies, jobs)
        held = [p.name for s in shards for p in s.glob("*.py")]
        assert len(shards) == jobs
        assert sorted(held) == sorted(f"l1-x@{n}.py" for n in names)  # each candidate in one shard
        assert all(len(list(s.glob("*.py"))) > 0 for s in shards[: len(names)])
