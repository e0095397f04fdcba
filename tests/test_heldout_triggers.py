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


def test_triggers_are_attributed_to_the_verdict_that_follows_them(tmp_path):
    fired_file = tmp_path / "heldout-fired.jsonl"
    stderr = [
        # the candidate's last output had no newline: the verdict line follows it on the same line
        "?[8meval [1/3] l1-x@honest_a.py CORRECT (3s elapsed, ETA after the next item)\n",
        "mgbench-heldout: fired fused_deferred\n",
        # two ranks' relayed lines run together, then the verdict
        "mgbench-heldout: fired id_ptr_cachemgbench-heldout: fired id_ptr_cache\n",
        "eval [2/3] l1-x@id_ptr_cache.py INCORRECT (rule rewritten_inputs) (9s elapsed, ETA 6s)\n",
        "eval [3/3] l1-x@fused_deferred.py CORRECT (12s elapsed, ETA 0s)\n",
    ]
    echo = io.StringIO()
    heldout_eval.record_triggers(iter(stderr), fired_file, echo)
    assert echo.getvalue() == "".join(stderr)  # everything reaches the terminal as it came
    rows = [json.loads(line) for line in fired_file.read_text().splitlines()]
    assert rows == [
        {"sample": "l1-x@honest_a.py", "fired": False},
        {"sample": "l1-x@id_ptr_cache.py", "fired": True},
        {"sample": "l1-x@fused_deferred.py", "fired": True},
    ]


def test_a_candidate_that_never_fires_is_recorded_as_unfired(tmp_path):
    fired_file = tmp_path / "f.jsonl"
    stderr = ["some rank output\n", "eval [1/1] l1-x@batch_head_skip.py CORRECT (1s elapsed, ETA 0s)\n"]
    heldout_eval.record_triggers(iter(stderr), fired_file, io.StringIO())
    assert json.loads(fired_file.read_text()) == {"sample": "l1-x@batch_head_skip.py", "fired": False}


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
