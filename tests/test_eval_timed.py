"""Timed-call checks without a rank pool: the timing hooks (after_region, distinct_in_region) and the
input perturbation that defeats caches over rotated inputs."""

from __future__ import annotations

import random

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.validation.eval.timed import perturb
from mgbench.validation.timing import time_solution


def test_regions_use_distinct_sets_and_the_hook_sees_every_call():
    seen: list[list[int]] = []
    calls = []

    def fn(x):
        calls.append(x.data_ptr())
        return x + 1

    stats = time_solution(
        fn,
        lambda i: (torch.full((8,), float(i)),),
        device="cpu",
        budget_s=0.05,
        min_iters=5,
        after_region=lambda idx, sets: seen.append(list(idx)),
        distinct_in_region=True,
    )
    assert seen[0] == [0]  # the first call gets its own hook
    assert sum(len(r) for r in seen) == len(calls)
    k = stats.calls_per_iter
    timed = seen[-stats.iters :]
    assert all(len(r) == k and len(set(r)) == k for r in timed), (k, timed[:3])
    assert stats.n_copies >= k


def test_without_hooks_the_rotation_is_the_baselines():
    stats = time_solution(lambda x: x + 1, lambda i: (torch.ones(8),), device="cpu", budget_s=0.05, min_iters=5)
    assert stats.n_copies == 2  # CPU rotation of the baselines, unchanged


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 300), seed=st.integers(0, 2**32))
def test_perturb_swaps_two_float_elements_alike_on_every_rank(n, seed):
    x = torch.randn(n, generator=torch.Generator().manual_seed(seed))
    idx = torch.arange(n)
    a, b = (x.clone(), idx.clone()), (x.clone(), idx.clone())
    assert perturb(a, random.Random(seed)) == 1 and perturb(b, random.Random(seed)) == 1
    assert torch.equal(a[0], b[0])  # same positions from the same seed
    assert torch.equal(a[1], idx)  # integer tensors are left alone
    assert torch.equal(a[0].sort().values, x.sort().values)  # a swap: same values
    assert int((a[0] != x).sum()) in (0, 2)  # two places (0 if they were equal)
