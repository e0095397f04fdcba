"""End-to-end: autograd functions that communicate in backward run forward and backward."""

from __future__ import annotations

import pytest

from mgbench.scrapers.harness.inputs.search import synthesize
from mgbench.scrapers.harness.make.render import prepare
from tests.harness.helpers import COLUMN_PARALLEL, entry_candidate
from tests.harness.helpers import FAST_8_NO_WS4 as FAST

pytestmark = pytest.mark.sandboxed  # runs candidates or tasks through child rank processes


def _autograd_candidate(entry: str) -> dict:
    cand, _ = entry_candidate(
        COLUMN_PARALLEL,
        entry,
        kind="autograd_function",
        params=["ctx", "input_", "weight"] if entry.startswith("Copy") else ["ctx", "x"],
    )
    return cand


def test_autograd_function_communicating_in_backward_runs_forward_and_backward():
    res = synthesize(_autograd_candidate("CopyToTensorParallel"), COLUMN_PARALLEL, FAST)
    assert res.accepted, res.reason
    assert res.spec["entry"] == "_mg_fwd_bwd" and res.spec["backward_of"] == "CopyToTensorParallel"
    from mgbench.scrapers.harness.make.render import task_source

    text = task_source(_autograd_candidate("CopyToTensorParallel"), prepare(COLUMN_PARALLEL), res.spec)
    assert "_MG_BACKWARD_OF = 'CopyToTensorParallel'" in text and "def _mg_fwd_bwd" in text


def test_autograd_function_without_collectives_in_backward_stays_rejected():
    res = synthesize(_autograd_candidate("LocalOnly"), COLUMN_PARALLEL, FAST)
    assert not res.accepted and res.reason == "no_collective"


LINEAR_BIAS = """import torch
import torch.distributed as dist


class RowParallelLinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.t() + bias

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        grad_x = g @ weight
        dist.all_reduce(grad_x)
        return grad_x, g.t() @ x, g.sum(0)
"""


def test_backward_gradient_of_another_shape_reshapes_that_input():
    cand, _ = entry_candidate(
        LINEAR_BIAS, "RowParallelLinearFn", kind="autograd_function", params=["ctx", "x", "weight", "bias"]
    )
    res = synthesize(cand, LINEAR_BIAS, FAST)
    assert res.accepted, res.reason
    assert {a["name"]: a["shape"] for a in res.spec["args"]}["bias"] == ["n"] and res.spec["backward_of"]
