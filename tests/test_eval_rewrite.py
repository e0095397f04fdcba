"""The judge's last trial on the kept input tensors rewritten in place (validation/eval/judge/candidate.py::
rewrite_into, runner._run_phases): the candidate is called on the very objects of an earlier call, each with
its address and version counter unchanged and new values, so a cache keyed on the input objects hits on every
rank and its stale answer is caught, where before it was caught only when the allocator happened to reuse an
address (benchmarks/heldout_cheats/*@id_ptr_cache.py). The judge-level cases are in test_eval_cheats.py."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.validation.eval.judge.candidate import _layout, rewrite_into

CPU = torch.device("cpu")


@st.composite
def input_sets(draw):
    """A kept input set (a tuple of tensors and a scalar) and the judge's next one, of one layout."""
    shape = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    dtype = draw(st.sampled_from([torch.float32, torch.float16, torch.int64]))
    n = draw(st.integers(1, 3))

    def one(fill: float) -> tuple:
        return (*(torch.full(shape, fill + i).to(dtype) for i in range(n)), 3 if fill == 1.0 else 4)

    return one(1.0), one(7.0)


@settings(max_examples=40, deadline=None)
@given(input_sets())
def test_rewritten_inputs_are_the_kept_objects_holding_the_new_values(sets):
    kept, host = sets
    tensors = kept[:-1]
    versions, ptrs = [t._version for t in tensors], [t.data_ptr() for t in tensors]
    got, n, why = rewrite_into(kept, _layout(list(kept)), host, CPU)
    assert why == "" and n == len(tensors)
    assert all(a is b for a, b in zip(got, tensors))  # the same objects: the same id
    assert [t._version for t in got[:-1]] == versions and [t.data_ptr() for t in got[:-1]] == ptrs
    assert all(torch.equal(a, b) for a, b in zip(got[:-1], host[:-1]))
    assert got[-1] == 4  # a scalar is the new one


def test_a_sparse_input_is_the_new_one_and_the_dense_ones_are_rewritten():
    kept = (torch.zeros(3), torch.eye(3).to_sparse())
    host = (torch.ones(3), (2 * torch.eye(3)).to_sparse())
    got, n, why = rewrite_into(kept, _layout(list(kept)), host, CPU)
    assert (n, why) == (1, "") and got[0] is kept[0] and torch.equal(got[0], torch.ones(3))
    assert torch.equal(got[1].to_dense(), 2 * torch.eye(3))


def test_nothing_kept_or_another_structure_means_fresh_inputs():
    host = (torch.ones(4), torch.ones(2, 3))
    assert rewrite_into(None, [], host, CPU) == (None, 0, "")
    kept = (torch.zeros(4),)
    assert rewrite_into(kept, _layout(list(kept)), host, CPU) == (None, 0, "")


def test_kept_inputs_changed_since_they_were_kept_are_a_mutation_not_a_write():
    changes = {
        "storage emptied": lambda t: t.untyped_storage().resize_(0),
        "storage replaced": lambda t: t.set_(torch.zeros(4)),
        "restrided": lambda t: t.as_strided_((2,), (2,)),
    }
    for what, change in changes.items():
        kept = (torch.zeros(4),)
        layout = _layout(list(kept))
        change(kept[0])
        got, n, why = rewrite_into(kept, layout, (torch.ones(4),), CPU)
        assert got is None and n == 0 and "rule mutated_input" in why, what
