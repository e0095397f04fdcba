"""The candidate rank's snapshot of an output (validation/eval/judge/candidate.py::_host_copy): the same values
as the tensor for every strided view, and on CUDA no device allocation, so the snapshot cannot reuse a block
the candidate freed while its side stream still reads it."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.validation.eval.judge.candidate import _host_copy


@st.composite
def views(draw):
    """A tensor and a strided view of it: slices with steps, a transpose, an expand or an overlapping view."""
    shape = draw(st.lists(st.integers(1, 6), min_size=1, max_size=3))
    base = torch.arange(int(torch.tensor(shape).prod()), dtype=torch.float32).reshape(shape)
    kind = draw(st.sampled_from(["slice", "transpose", "expand", "overlap"]))
    if kind == "slice":
        index = tuple(slice(draw(st.integers(0, n - 1)), None, draw(st.integers(1, 3))) for n in shape)
        return base[index]
    if kind == "transpose":
        return base.t() if base.dim() == 2 else base.flip(0).permute(*reversed(range(base.dim())))
    if kind == "expand":
        return base.flatten()[:3].expand(draw(st.integers(1, 4)), -1)
    rows = draw(st.integers(1, max(1, base.numel() - 2)))
    return base.flatten().as_strided((rows, 3), (1, 1)) if base.numel() >= rows + 2 else base


@settings(max_examples=60, deadline=None)
@given(views())
def test_a_snapshot_holds_the_values_of_every_strided_view(view):
    snap = _host_copy(view)
    assert snap.device.type == "cpu" and snap.shape == view.shape and torch.equal(snap, view)


def test_what_is_no_plain_tensor_is_left_to_the_encoder():
    assert _host_copy(3) == 3
    sparse = torch.eye(3).to_sparse()
    assert _host_copy(sparse) is sparse


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_snapshot_allocates_nothing_on_the_device():
    base = torch.randn(64, 48, device="cuda")
    views_ = [base, base[:, ::2], base.t(), base[0, :5].expand(7, -1), base.flatten().as_strided((9, 5), (3, 1))]
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    snaps = [_host_copy(v) for v in views_]
    assert torch.cuda.memory_stats()["allocation.all.allocated"] == before
    assert all(torch.equal(s, v.cpu()) for s, v in zip(snaps, views_))
