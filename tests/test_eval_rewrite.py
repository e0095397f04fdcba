"""The judge's last trial on the kept input tensors rewritten in place (validation/eval/judge/candidate.py::
rewrite_into, runner._run_phases): the candidate is called on the very objects of an earlier call, each with
its address and version counter unchanged and new values, so a cache keyed on the input objects hits on every
rank and its stale answer is caught, where before it was caught only when the allocator happened to reuse an
address (benchmarks/heldout_cheats/*@id_ptr_cache.py)."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.validation.eval.judge.candidate import rewrite_into


@st.composite
def input_sets(draw):
    """A kept input set (a tuple of tensors, views among them, and a scalar) and a fresh one of one layout."""
    shape = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    kind = draw(st.sampled_from(["dense", "slice", "transpose"]))
    dtype = draw(st.sampled_from([torch.float32, torch.float16, torch.int64]))

    def one(fill: float) -> torch.Tensor:
        base = torch.full([n * 2 for n in shape], fill).to(dtype)
        if kind == "slice":
            return base[tuple(slice(0, None, 2) for _ in shape)]
        if kind == "transpose":
            return base.permute(*reversed(range(base.dim())))
        return base

    return (one(1.0), one(1.0).contiguous(), 3), (one(7.0), one(7.0).contiguous(), 4)


@settings(max_examples=40, deadline=None)
@given(input_sets())
def test_rewritten_inputs_are_the_kept_objects_holding_the_new_values(sets):
    kept, fresh = sets
    versions, ptrs = [t._version for t in kept[:2]], [t.data_ptr() for t in kept[:2]]
    got, n = rewrite_into(kept, fresh)
    assert n == 2
    assert all(a is b for a, b in zip(got[:2], kept[:2]))  # same objects: same id
    assert [t._version for t in got[:2]] == versions and [t.data_ptr() for t in got[:2]] == ptrs
    assert all(torch.equal(a, b) for a, b in zip(got[:2], fresh[:2]))
    assert got[2] == 4  # a scalar is the new one


def test_inputs_that_do_not_match_are_fresh_objects():
    fresh = (torch.ones(4), torch.ones(2, 3))
    unlike = [(torch.zeros(4),), (torch.zeros(4), torch.zeros(3, 2)), (torch.zeros(4), torch.zeros(2, 3).half())]
    for kept in (None, *unlike):
        assert rewrite_into(kept, fresh) == (fresh, 0)


def test_an_expanded_input_is_not_written_over_itself():
    kept = (torch.zeros(3).expand(2, 3),)
    fresh = (torch.ones(2, 3).as_strided((2, 3), (0, 1)),)
    got, n = rewrite_into(kept, fresh)
    assert got is fresh and n == 0
