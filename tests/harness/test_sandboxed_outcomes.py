"""End-to-end: what a run concludes: returned metrics are outputs; echoes, overwritten outputs, outputs
that ignore the inputs are rejected; skips, GPU needs and missing imports are named."""

from __future__ import annotations

import pytest

from mgbench.scrapers.harness.inputs.search import Budget, synthesize
from tests.harness.helpers import (
    CASES,
    FAST_8_NO_WS4,
    FAST_12,
    FAST_14,
    FAST_14_NO_WS4,
    TRITON,
    _cand,
    _function,
    _method,
    candidate,
    entry_candidate,
)

pytestmark = pytest.mark.sandboxed  # runs candidates or tasks through child rank processes


CHECK = """import torch
import torch.distributed as dist


def check_same(model, group):
    for p in model.parameters():
        ref = p.detach().clone()
        dist.broadcast(ref, 0, group=group)
"""


def test_model_argument_returned_unchanged_is_an_echo():
    res = synthesize(
        _cand("check_same", ["model", "group"]), CHECK, Budget(seconds=20, attempts=4, attempt_timeout_s=6, mem_mb=512)
    )
    assert not res.accepted and res.reason == "degenerate_copy_of_inputs"


METRIC = (
    """import torch
import torch.distributed as dist


def all_reduce_mean(x):
    t = x.float().sum().clone()
    dist.all_reduce(t)
    return t.item() / dist.get_world_size()
""",
    ["x"],
)


RANK_ONLY = (
    """import torch
import torch.distributed as dist


def world_info(x):
    dist.barrier()
    return [dist.get_rank(), dist.get_world_size()]
""",
    ["x"],
)


def test_returned_metric_is_the_output(monkeypatch):
    """A reduced number returned as a Python float is an output; numbers that ignore the inputs are not."""
    monkeypatch.setitem(CASES, "metric", METRIC)
    res = synthesize(*candidate("metric"), FAST_12)
    assert res.accepted, (res.reason, res.last_error)
    monkeypatch.setitem(CASES, "rank_only", RANK_ONLY)
    res = synthesize(*candidate("rank_only"), FAST_12)
    assert not res.accepted and res.reason == "input_insensitive", res.reason


NCCL_NAMED = """import torch
import torch.distributed as dist


class NCCLAllGatherDispatcher:
    def token_dispatch(self, hidden):
        out = [torch.empty_like(hidden) for _ in range(self.ep_size)]
        dist.all_gather(out, hidden)
        return torch.cat(out)
"""


def test_a_class_named_after_nccl_is_not_a_gpu_need():
    """`'NCCLAllGatherDispatcher' object has no attribute 'ep_size'` is a missing attribute (searched), not a
    GPU requirement: GPU words count only outside quoted names."""
    cand, text = _method(NCCL_NAMED, "NCCLAllGatherDispatcher.token_dispatch")
    cand["params"].append({"name": "hidden", "kind": "positional", "annotation": None, "default": None})
    res = synthesize(cand, text, FAST_14)
    assert not res.reason.startswith("needs_gpu"), res.reason
    assert res.accepted and res.spec["attrs"][0]["name"] == "ep_size", (res.reason, res.last_error)


SKIPPING = (
    """import pytest
import torch
import torch.distributed as dist


def test_needs_eight(x):
    if dist.get_world_size() != 8:
        pytest.skip("This test specifically requires 8 GPUs")
    dist.all_reduce(x)
    return x
""",
    ["x"],
)


def test_a_test_that_skips_itself_is_reported_as_skipped(monkeypatch):
    """`pytest.skip(reason)` is the test's own decision, reported with its reason (it used to read as a
    missing import `pytest.skip`)."""
    monkeypatch.setitem(CASES, "skipping", SKIPPING)
    res = synthesize(*candidate("skipping"), FAST_14)
    assert res.reason == "skipped_by_test: This test specifically requires 8 GPUs" and res.attempts == 1


SCRATCH = """import torch
import torch.distributed as dist

_CACHE = {}


def stage_chunk(x):
    buf = _CACHE.setdefault(tuple(x.shape), torch.empty(x.shape))
    buf.copy_(x)
    handle = dist.all_reduce(buf, async_op=True)
    return buf, handle
"""


def test_an_output_that_later_calls_overwrite_is_rejected():
    """Megatron `_stage_topk_target_chunk` returns a module-level scratch buffer: the next call overwrites the
    previous output, so a task's reference output would change under the comparison. The returned handle is
    waited on before the output is read."""
    res = synthesize(*_function(SCRATCH, "stage_chunk", ["x"]), FAST_14_NO_WS4)
    assert not res.accepted and res.reason == "output_overwritten_by_later_calls", res.reason
    ok = synthesize(
        *_function(
            SCRATCH.replace("_CACHE.setdefault(tuple(x.shape), torch.empty(x.shape))", "torch.empty(x.shape)"),
            "stage_chunk",
            ["x"],
        ),
        FAST_14_NO_WS4,
    )
    assert ok.accepted, (ok.reason, ok.last_error)


def test_launching_a_stubbed_triton_kernel_is_a_missing_import():
    cand, _ = entry_candidate(TRITON, "launched_all_reduce", params=["x", "group"])
    res = synthesize(cand, TRITON, FAST_8_NO_WS4)
    assert not res.accepted and res.reason == "needs_import: triton"


CHECK_FLAG = """import torch
import torch.distributed as dist


def overflow_flag(grad, group):
    flag = torch.zeros(1)
    if not torch.isfinite(grad).all():
        flag.fill_(1.0)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)
    return grad, flag
"""


GATHER_LENGTHS = """import torch
import torch.distributed as dist


def gather_lengths(lengths, group):
    out = [torch.empty_like(lengths) for _ in range(dist.get_world_size(group))]
    dist.all_gather(out, lengths, group=group)
    return torch.arange(len(out)), torch.cat(out).tolist()
"""


def test_outputs_whose_computed_part_ignores_the_inputs_are_rejected():
    """An overflow check on finite random gradients returns its input and a flag that is always 0: the
    output changes with the seed only through the echoed input, so it is no task. Gathered values returned
    as Python numbers are computed output (accepted)."""
    budget = Budget(seconds=30, attempts=6, attempt_timeout_s=6, mem_mb=512)
    cand, text = entry_candidate(CHECK_FLAG, "overflow_flag", params=["grad", "group"])
    res = synthesize(cand, text, budget)
    assert not res.accepted and "computed_output_insensitive" in res.reason, res.reason
    cand, text = entry_candidate(GATHER_LENGTHS, "gather_lengths", params=["lengths", "group"])
    res = synthesize(cand, text, budget)
    assert res.accepted, (res.reason, res.last_error)
