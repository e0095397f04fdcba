"""The comparison: exact structure/dtype/shape, integers exact, floats within calibrated tolerance."""

from __future__ import annotations

import math
from unittest import mock

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.validation import compare as compare_mod
from mgbench.validation.compare import ATOL_REL_MAX, Tolerance, calibrate, compare, error_scale, excess

FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def _t(seed: int, n: int, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(seed)).to(dtype)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 300), dt=st.sampled_from(FLOATS))
def test_identical_passes_and_zeros_fail(seed, n, dt):
    x = _t(seed, n, dt)
    assert compare(x, x.clone())[0]
    if bool((x != 0).any()):
        assert not compare(torch.zeros_like(x), x, Tolerance(0.016, ATOL_REL_MAX))[0]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(8, 300), dt=st.sampled_from(FLOATS))
def test_another_draw_fails_even_at_max_tolerance(seed, n, dt):
    a, b = _t(seed, n, dt), _t(seed + 1, n, dt)
    assert not compare(a, b, Tolerance(0.016, ATOL_REL_MAX))[0]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 200), noise=st.floats(1e-7, 1e-2))
def test_calibrated_tolerance_accepts_the_reference(seed, n, noise):
    exp = _t(seed, n).double()
    act = (exp + noise * _t(seed + 7, n).double()).float()
    tol, worst = calibrate(act, exp, "float32")
    assert compare(act, exp, tol, exact_dtype=False)[0] or tol.atol_rel > ATOL_REL_MAX
    assert worst >= 0


def test_structure_dtype_shape_and_ints():
    x = torch.arange(6)
    assert compare((x, {"a": x}), (x.clone(), {"a": x.clone()}))[0]
    assert not compare((x,), [x])[0]
    assert not compare(x.float(), x.double())[0]
    assert not compare(x.reshape(2, 3), x)[0]
    y = x.clone()
    y[3] += 1
    assert "integer" in compare(y, x)[1]


def test_nan_never_passes_and_complex_compares_as_complex():
    x = torch.randn(8)
    y = x.clone()
    y[0] = math.nan
    assert not compare(y, x, Tolerance(1.0, ATOL_REL_MAX))[0]
    c = torch.randn(8, dtype=torch.complex64)
    assert compare(c, c.clone())[0]
    assert not compare(c.conj(), c)[0] or bool((c.imag == 0).all())
    assert not compare(c.real, c)[0]


def test_the_judge_caps_the_tolerance_at_the_computations_ceiling():
    """A float32 reference 1.6% off its oracle calibrates at most the float32 ceiling; the same output
    computed from bfloat16 inputs may carry bfloat16 error (the least precise dtype decides)."""
    from mgbench.validation.compare import ceiling_of_dtypes
    from mgbench.validation.eval.judge.verify import tolerance

    expected = torch.randn(4096, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    reference = (expected * 1.016).float()
    assert tolerance(None, [reference], [expected], True, ["float32"]).atol_rel == ceiling_of_dtypes(["float32"])
    assert tolerance(None, [reference], [expected], True, ["bfloat16", "int64"]).atol_rel > 0.016
    assert ceiling_of_dtypes(["int64"]) == ATOL_REL_MAX and ceiling_of_dtypes(["float32"]) < ATOL_REL_MAX


def _rows(seed: int, magnitudes: list[float], width: int = 64) -> torch.Tensor:
    """A (rows, width) float64 output whose row i has rms about magnitudes[i]."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(len(magnitudes), width, generator=g, dtype=torch.float64) * torch.tensor(magnitudes)[:, None]


def test_errors_in_a_row_of_large_values_are_measured_against_that_row():
    """A causal attention's first queries are tens of times the output's rms at full size: a row of them
    carries rounding errors in proportion to its own values, also on elements that cancel to nearly 0.
    Measured against the leaf's rms such an error looked like a tenth of the output; against its row it is
    what it is, a fraction of a percent. A row wrong by a fifth of its scale still fails."""
    mags = [60.0] + [1.0] * 63
    expected = _rows(0, mags)
    expected[0, 0] = 0.01  # a result that cancelled: rtol covers nothing here
    noise = 0.003 * torch.tensor(mags, dtype=torch.float64)[:, None]
    g = torch.Generator().manual_seed(1)
    actual = expected + noise * torch.randn(expected.shape, generator=g, dtype=torch.float64)
    leaf_rms = float(expected.pow(2).mean().sqrt())
    assert float((actual - expected)[0].abs().max()) / leaf_rms > 0.05  # what the leaf's rms alone saw
    assert excess(actual, expected, 0.016) < 0.02
    assert compare(actual.to(torch.bfloat16), expected, Tolerance(0.016, 0.05), exact_dtype=False)[0]
    for row in (0, 5):  # a big row or an ordinary one, off by a fifth of its scale (never below the leaf's rms)
        wrong = actual.clone()
        wrong[row] += 0.2 * max(float(expected[row].pow(2).mean().sqrt()), leaf_rms)
        assert not compare(wrong, expected, Tolerance(0.016, ATOL_REL_MAX))[0], row


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    mags=st.lists(st.floats(1e-3, 1e3), min_size=1, max_size=12),
    width=st.integers(1, 40),
)
def test_zeros_and_a_missing_largest_row_fail_whatever_the_row_magnitudes(seed, mags, width):
    expected = _rows(seed, mags, width)
    assert not compare(torch.zeros_like(expected), expected, Tolerance(0.016, ATOL_REL_MAX))[0]
    missing = expected.clone()
    missing[int(expected.pow(2).mean(-1).argmax())] = 0  # the largest row not computed: never excused
    assert not compare(missing, expected, Tolerance(0.016, ATOL_REL_MAX))[0]


def test_a_vector_is_measured_against_its_rms_as_before():
    expected = _t(3, 1000).double()
    expected[0] = 500.0
    rms = float(expected.pow(2).mean().sqrt())
    assert error_scale(expected) == rms and error_scale(expected[None, :1]) == float(expected[0].abs())
    actual = expected.clone()
    actual[1] += 0.05 * rms
    assert excess(actual, expected, 0.0) == pytest.approx(0.05)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.sampled_from([(37,), (5, 3), (6, 1), (4, 2, 9), (11, 16)]),
    st.sampled_from([torch.float32, torch.bfloat16, torch.float64]),
    st.sampled_from([0.0, 1e-3, 0.05]),
    st.integers(1, 40),
)
def test_a_large_leaf_measured_in_chunks_of_rows_gives_the_same_excess(seed, shape, dt, rtol, chunk):
    """Leaves over CHUNK_ELEMENTS are measured in chunks of rows (less float64 memory at full size on a
    shared GPU): the excess is the one-piece value, whatever the chunk and the rows' magnitudes."""
    g = torch.Generator().manual_seed(seed)
    e = torch.randn(shape, generator=g, dtype=torch.float64)
    e = e * torch.logspace(0, 2, shape[0], dtype=torch.float64).reshape(-1, *([1] * (len(shape) - 1)))
    a = (e + 0.01 * torch.randn(shape, generator=g, dtype=torch.float64)).to(dt)
    whole = excess(a, e, rtol)
    a_bad = a.clone()
    a_bad.view(-1)[seed % a.numel()] = float("nan")
    with mock.patch.object(compare_mod, "CHUNK_ELEMENTS", chunk):
        assert excess(a, e, rtol) == whole
        assert excess(a_bad, e, rtol) == math.inf
