"""The reward of one completion from its eval records (mgbench.rl.reward over the one scoring rule): 0 for no
code, an incorrect answer or suspicious speed; the SOL score where timings are results and a roofline bound
exists; s / (1 + s) without a bound; 0.5 (correctness only) where timings are not results. Pure: hand-made
records, no evaluation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.rl.reward import CORRECT_ONLY, KINDS, Reward, no_code, of_records
from mgbench.validation.eval.verdict import Rules

GPU = {"backend": "nccl", "size": "full", "hardware": "2x NVIDIA H200"}
CPU = {"backend": "gloo", "size": "smoke", "hardware": "x86_64 cpu"}


def rec(
    correct: bool = True,
    speedup: float | None = 1.5,
    where: dict | None = None,
    cand_ms: float | None = 2.0,
    roofline_ms: float | None = None,
    ws: int = 2,
    **extra,
) -> dict:
    return {
        "task_id": "l1-all_reduce-sum-bw-fp16",
        "sample": "s.py",
        "sample_hash": "h",
        "world_size": ws,
        **(where or GPU),
        "level": 1,
        "dims": ["collective"],
        "status": "correct" if correct else "incorrect",
        "reason": "" if correct else "trial 1/5: rank 0: wrong output (rule values)",
        "correct": correct,
        "speedup": speedup if correct else None,
        "within_noise": False,
        "noise_floor": 1.05,
        "flags": [],
        "review": False,
        "timing_on": True,
        "timing": {"candidate": {"median_ms": cand_ms}} if cand_ms else {},
        "roofline_ms": roofline_ms,
        "roofline_fraction": None,
        **extra,
    }


def test_no_code_is_zero():
    for r in (no_code(), of_records([])):
        assert r == Reward(0.0, "no_code", KINDS["no_code"]) and r.verdict is None


def test_an_incorrect_answer_is_zero_with_its_reason():
    r = of_records([rec(correct=False)])
    assert (r.value, r.kind) == (0.0, "incorrect") and "rule values" in r.reason
    # correct at one world size, wrong at the other: incorrect
    r = of_records([rec(ws=2), rec(correct=False, ws=4)])
    assert (r.value, r.kind) == (0.0, "incorrect")


@pytest.mark.parametrize(
    "extra",
    [
        {"flags": ["review: speedup 40x exceeds the sanity bound 10x"], "review": True},
        {"flags": ["review: faster than the roofline bound (3.0x)"], "review": True},
        {"suspicious": "marked by eval"},
    ],
)
def test_suspicious_speed_is_zero(extra):
    r = of_records([rec(speedup=40.0, roofline_ms=1.0, **extra)])
    assert (r.value, r.kind) == (0.0, "suspicious") and r.verdict["correct"]
    # opting in (--accept-suspicious) makes it count again
    assert of_records([rec(speedup=40.0, **extra)], Rules(accept_suspicious=True)).value > 0


def test_the_sol_score_where_timings_are_results_and_a_bound_exists():
    # T = 2 ms, T_base = 2 x 1.5 = 3 ms, T_SOL = 1 ms: S = 1 / (1 + (2 - 1) / (3 - 1)) = 2/3
    r = of_records([rec(speedup=1.5, cand_ms=2.0, roofline_ms=1.0)])
    assert r.kind == "sol" and r.value == pytest.approx(2 / 3)
    # the baseline's own time scores 0.5; the smallest S over world sizes counts
    both = of_records([rec(speedup=1.5, roofline_ms=1.0, ws=2), rec(speedup=1.0, roofline_ms=1.0, ws=4)])
    assert both.kind == "sol" and both.value == pytest.approx(0.5)


def test_the_speedup_tier_without_a_roofline_bound():
    r = of_records([rec(speedup=3.0, roofline_ms=None)])
    assert r.kind == "speedup" and r.value == pytest.approx(0.75)


def test_correctness_only_where_timings_are_not_results():
    for where in (CPU, {**GPU, "size": "smoke"}, {**GPU, "backend": "shared-gpu"}):
        r = of_records([rec(speedup=5.0, roofline_ms=1.0, where=where)])
        assert (r.value, r.kind) == (CORRECT_ONLY, "correct_only"), where
    untimed = of_records([rec(speedup=None, timing_on=False)])
    assert (untimed.value, untimed.kind) == (CORRECT_ONLY, "correct_only")


def test_a_speedup_within_the_noise_floor_is_the_baselines_score():
    r = of_records([rec(speedup=1.02, roofline_ms=1.0, within_noise=True)])
    assert r.kind == "sol" and r.value == pytest.approx(0.5)


RECORDS = st.builds(
    rec,
    correct=st.booleans(),
    speedup=st.one_of(st.none(), st.floats(0.01, 100.0)),
    where=st.sampled_from([GPU, CPU, {**GPU, "size": "smoke"}]),
    cand_ms=st.one_of(st.none(), st.floats(0.01, 100.0)),
    roofline_ms=st.one_of(st.none(), st.floats(0.001, 100.0)),
    within_noise=st.booleans(),
    timing_on=st.booleans(),
    flags=st.sampled_from([[], ["review: speedup 40x exceeds the sanity bound 10x"], ["review: static finding"]]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(RECORDS, min_size=0, max_size=3), st.booleans())
def test_a_reward_is_in_0_1_and_above_0_only_when_correct(records, accept):
    r = of_records(records, Rules(accept_suspicious=accept))
    assert 0.0 <= r.value <= 1.0 and r.kind in KINDS
    if r.value > 0:
        assert records and all(x["correct"] for x in records)
        assert r.kind in ("sol", "speedup", "correct_only")
