"""Property tests of the scoring metrics (pass@k, fast_p@k, geometric mean, solved curve)."""

from __future__ import annotations

import math
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.validation.eval import metrics
from mgbench.validation.eval.metrics import Sample

nck = st.integers(1, 40).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n)))


@given(nck)
def test_pass_at_k_is_a_probability_and_exact(t):
    n, c, k = t
    p = metrics.pass_at_k(n, c, k)
    assert 0.0 <= p <= 1.0
    exact = 1.0 - math.comb(n - c, k) / math.comb(n, k)
    assert p == pytest.approx(exact, abs=1e-9)


@given(nck)
def test_pass_at_1_is_fraction_correct(t):
    n, c, _ = t
    assert metrics.pass_at_k(n, c, 1) == pytest.approx(c / n)


@given(nck)
def test_pass_at_k_monotone_in_k_and_c(t):
    n, c, k = t
    p = metrics.pass_at_k(n, c, k)
    if k < n:
        assert metrics.pass_at_k(n, c, k + 1) >= p - 1e-12
    if c < n:
        assert metrics.pass_at_k(n, c + 1, k) >= p - 1e-12
    assert metrics.pass_at_k(n, 0, k) == 0.0 and metrics.pass_at_k(n, n, k) == 1.0


@settings(max_examples=30)
@given(st.lists(st.booleans(), min_size=1, max_size=8), st.integers(1, 8))
def test_pass_at_k_equals_enumeration_over_subsets(flags, k):
    n = len(flags)
    k = min(k, n)
    subsets = list(combinations(flags, k))
    expected = sum(any(s) for s in subsets) / len(subsets)
    assert metrics.pass_at_k(n, sum(flags), k) == pytest.approx(expected)


def test_pass_at_k_rejects_bad_arguments():
    for n, c, k in ((3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)):
        with pytest.raises(ValueError):
            metrics.pass_at_k(n, c, k)


samples = st.lists(
    st.builds(Sample, st.booleans(), st.one_of(st.none(), st.floats(0.01, 100))), min_size=1, max_size=12
)


@given(samples, st.floats(0, 5), st.floats(0, 5))
def test_fast_p_is_monotone_in_p_and_bounded_by_pass(ss, p1, p2):
    lo, hi = sorted((p1, p2))
    k = 1
    assert metrics.fast_p_at_k(ss, hi, k) <= metrics.fast_p_at_k(ss, lo, k) + 1e-12
    assert metrics.fast_p_at_k(ss, lo, k) <= metrics.pass_at_k(len(ss), sum(s.correct for s in ss), k) + 1e-12


@given(ss=samples)
def test_fast_0_equals_pass(ss):
    c = sum(s.correct for s in ss)
    assert metrics.fast_p_at_k(ss, 0.0, 1) == pytest.approx(metrics.pass_at_k(len(ss), c, 1))


def test_incorrect_fast_samples_do_not_count():
    ss = [Sample(False, 50.0), Sample(True, 0.5), Sample(True, 2.5)]
    assert metrics.fast_count(ss, 1.0) == 1
    assert metrics.fast_count(ss, 2.5) == 0  # strictly faster than p


@given(st.lists(st.floats(0.01, 100), min_size=1, max_size=20))
def test_geomean_between_min_and_max(xs):
    g = metrics.geomean(xs)
    assert min(xs) * (1 - 1e-9) <= g <= max(xs) * (1 + 1e-9)
    assert metrics.geomean([xs[0]] * 3) == pytest.approx(xs[0])


def test_geomean_edge_cases():
    assert metrics.geomean([]) is None
    assert metrics.geomean([2.0, 8.0]) == pytest.approx(4.0)
    with pytest.raises(ValueError):
        metrics.geomean([1.0, 0.0])


@given(
    st.dictionaries(st.text(min_size=1, max_size=4), samples, min_size=1, max_size=6),
    st.lists(st.floats(0.1, 50), min_size=2, max_size=10),
)
def test_solved_curve_non_increasing(per_task, ths):
    ths = sorted(ths)
    curve = metrics.solved_curve(per_task, ths)
    assert all(0.0 <= y <= 1.0 for y in curve)
    assert all(a >= b - 1e-12 for a, b in zip(curve, curve[1:]))
    assert metrics.solved_fraction(per_task, 0.0) >= curve[0] - 1e-12


def test_mean_over_tasks_skips_tasks_with_too_few_samples():
    per_task = {"a": [Sample(True, 2.0)], "b": [Sample(False), Sample(True, 1.2)]}
    assert metrics.mean_over_tasks(per_task, 1) == pytest.approx((1 + 0.5) / 2)
    assert metrics.mean_over_tasks(per_task, 2) == pytest.approx(1.0)
    assert metrics.mean_over_tasks(per_task, 3) is None
    assert metrics.mean_over_tasks(per_task, 1, p=1.5) == pytest.approx((1 + 0) / 2)
