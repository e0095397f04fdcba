"""Timed-call checks without a rank pool: the timing hooks (after_region, distinct_in_region) and the
input perturbation that defeats caches over rotated inputs."""

from __future__ import annotations

import random

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.validation.eval.timed import owners, perturb
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
def test_perturb_without_owners_swaps_two_float_elements_alike_on_every_rank(n, seed):
    x = torch.randn(n, generator=torch.Generator().manual_seed(seed))
    idx = torch.arange(n)
    a, b = (x.clone(), idx.clone()), (x.clone(), idx.clone())
    assert perturb(a, random.Random(seed)) == 1 and perturb(b, random.Random(seed)) == 1
    assert torch.equal(a[0], b[0])  # same positions from the same seed
    assert torch.equal(a[1], idx)  # integer tensors are left alone
    assert torch.equal(a[0].sort().values, x.sort().values)  # a swap: same values
    assert int((a[0] != x).sum()) in (0, 2)  # two places (0 if they were equal)


def _swapped(before: torch.Tensor, after: torch.Tensor) -> set[int]:
    return set((before != after).nonzero().reshape(-1).tolist())


@settings(max_examples=40, deadline=None)
@given(
    groups=st.lists(st.integers(0, 2), min_size=2, max_size=4),
    n=st.integers(2, 200),
    seed=st.integers(0, 2**32),
    decoy=st.integers(0, 2**62),
    nan=st.booleans(),
)
def test_perturb_with_owners_keeps_equal_tensors_equal_across_ranks(groups, n, seed, decoy, nan):
    """Simulated ranks: `w` is shared by the ranks of a group (a replicated weight; a NaN in it is
    still a replica), `x` differs on every rank. After the decoy's perturbation, ranks of one group
    still hold equal `w`s: an honest candidate that relies on the replication stays right."""

    def make(rank):
        g = torch.Generator().manual_seed(seed * 8 + groups[rank])
        w = torch.randn(n, generator=g)
        if nan:
            w[0] = float("nan")
        x = torch.randn(n, generator=torch.Generator().manual_seed(seed * 8 + 4 + rank))
        return (x, torch.arange(n), w)

    sets = [make(r) for r in range(len(groups))]
    own = [owners(sets[r], r, make) for r in range(len(groups))]
    for r, g in enumerate(groups):
        assert own[r] == [r, r, groups.index(g)], (groups, own)  # x its own; idx not compared; w the group's first
        assert perturb(sets[r], random.Random(decoy), own[r]) == 2
    for r, g in enumerate(groups):
        first = groups.index(g)
        assert torch.equal(sets[r][2].view(torch.int32), sets[first][2].view(torch.int32))  # bitwise, NaN too
        assert torch.equal(sets[r][1], torch.arange(n))


def test_perturb_with_owners_swaps_per_rank_tensors_at_their_own_places():
    """A tensor that differs per rank gets its own swap on each rank (for all but about 2/n of the decoy
    seeds): a rank cannot answer an elementwise collective's decoy by swapping the earlier answer."""
    n, same = 1000, 0
    x = [torch.randn(n, generator=torch.Generator().manual_seed(10 + r)) for r in range(2)]
    for decoy in range(200):
        got = [(t.clone(),) for t in x]
        for r in range(2):
            perturb(got[r], random.Random(decoy), owners(got[r], r, lambda q: (x[q],)))
        places = [_swapped(x[r], got[r][0]) for r in range(2)]
        assert all(len(p) == 2 for p in places)
        same += places[0] == places[1]
    assert same <= 4, same  # about 200 * 2/n expected
