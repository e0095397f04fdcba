"""Speedups, noise floor, roofline and review flags from recorded baselines; outcome classification."""

from __future__ import annotations

import json

import pytest

from mgbench.validation.eval import outcome
from mgbench.validation.eval.tasks import TaskInfo, baselines_for, read_baselines
from mgbench.validation.pool import JobOutcome

REF = {"median_ms": 2.0, "cv": 0.01, "iters": 100}
CAND = {"median_ms": 1.0, "cv": 0.02, "iters": 100}


@pytest.fixture
def baselines(tmp_path):
    d = tmp_path / "results" / "h200x2"
    d.mkdir(parents=True)
    lines = [
        {
            "task_id": "t",
            "content_hash": "h",
            "world_size": 2,
            "baseline": "eager",
            "median_ms": 2.2,
            "roofline": {"bound_ms": 0.8},
        },
        {"task_id": "t", "content_hash": "h", "world_size": 2, "baseline": "compile", "median_ms": 1.6},
        {
            "task_id": "t",
            "content_hash": "h",
            "world_size": 2,
            "baseline": "null",
            "median_ms": 2.21,
            "noise_speedup_p50": 0.01,
            "noise_speedup_p95": 0.04,
        },
        {"task_id": "t", "content_hash": "h", "world_size": 4, "baseline": "eager", "median_ms": 9.0},
    ]
    (d / "baselines.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return read_baselines([d / "baselines.jsonl"])


def test_baselines_are_keyed_and_carry_the_null_noise(baselines):
    entries = baselines[("t", "h")]
    assert {e["baseline"] for e in entries} == {"eager", "compile", "null"} | {"eager"}
    eager2 = [e for e in entries if e["baseline"] == "eager" and e["world_size"] == 2][0]
    assert eager2["hardware"] == "h200x2" and eager2["noise_speedup_p95"] == 0.04


def test_speedups_noise_roofline_and_flags(baselines):
    task = TaskInfo("t", "", content_hash="h", baselines=baselines[("t", "h")])
    bases = baselines_for(task, 2, None)
    assert len(bases) == 3 and baselines_for(task, 2, "other-hw") == []
    sp = outcome.speedups(REF, CAND, bases)
    assert sp == {"reference": 2.0, "eager@h200x2": pytest.approx(2.2), "compile@h200x2": pytest.approx(1.6)}
    floor, source = outcome.noise_floor(bases, REF, CAND)
    assert floor == pytest.approx(1.04) and source.startswith("recorded null baseline")
    assert outcome.roofline_ms(bases) == 0.8
    assert outcome.review_flags(2.0, 1.0, 0.8, 10.0) == []
    flags = outcome.review_flags(20.0, 0.5, 0.8, 10.0)
    assert len(flags) == 2 and all(f.startswith("review") for f in flags)


def test_baselines_of_an_older_timing_method_are_dropped():
    bases = [{"baseline": "eager", "median_ms": 1.0}, {"baseline": "eager", "median_ms": 1.0, "timing_version": 2}]
    keep, stale = outcome.current_timing(bases, 2)
    assert stale == 1 and keep == bases[1:]


def test_in_run_noise_grows_with_spread():
    quiet = outcome.noise_floor([], REF, CAND)[0]
    noisy = outcome.noise_floor([], {**REF, "cv": 0.5}, {**CAND, "cv": 0.5})[0]
    assert 1.0 < quiet < noisy


def test_timing_gap_flags_unseen_device_work():
    assert outcome.timing_gap_reason(0.02, 0.03, 0.02, 0.03) == ""
    assert "side stream" in outcome.timing_gap_reason(0.02, 0.03, 0.02, 2.1)
    assert outcome.timing_gap_reason(0.02, None, 0.02, 2.1) == ""  # CPU: no cross-check


@pytest.mark.parametrize(
    "oc,status,words",
    [
        (JobOutcome("timeout", [None, None], "timed out after 5s (ranks [0] did not finish)"), "timeout", "hung"),
        (JobOutcome("crashed", [None, None], "rank 1 process died (exit code -9)"), "error", "exit code -9"),
        (
            JobOutcome(
                "error",
                [None, None],
                "rank 0: CandidateError: solution() raised KeyError: 'x' (at a.py:3) (handlers.py:120)",
            ),
            "error",
            "solution() raised KeyError",
        ),
        (
            JobOutcome("error", [None, None], "rank 1: ContractError: task: missing 'oracle' (handlers.py:80)"),
            "error",
            "harness error on rank 1",
        ),
        (
            JobOutcome("ok", [{"ok": True, "result": {"reason": ""}}, {"ok": True, "result": {"reason": "bad"}}]),
            "incorrect",
            "rank 1: bad",
        ),
        (JobOutcome("ok", [{"ok": True, "result": {"reason": ""}}] * 2), "ok", ""),
    ],
)
def test_classify(oc, status, words):
    st, why = outcome.classify(oc, "trial 1/5")
    assert st == status and words in why
    assert "handlers.py" not in why
