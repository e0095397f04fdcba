"""Harness synthesis on hand-written candidates, and sandboxing of hostile ones."""
from __future__ import annotations

import os

import pytest

from scrapers.harness.search import Budget, synthesize
from tests.harness_cases import candidate

FAST = Budget(seconds=40, attempts=12, attempt_timeout_s=6, mem_mb=512)


@pytest.mark.parametrize("name", ["grad_allreduce", "gather_out", "a2a_splits", "divisible", "parallel_state"])
def test_synthesizes_an_accepted_harness(name):
    cand, text = candidate(name)
    res = synthesize(cand, text, FAST)
    assert res.accepted, (res.reason, res.last_error)
    assert 2 in res.world_sizes
    assert all(fp["nonzero"] > 0 for fp in res.fingerprints["ws2"])
    kinds = {a["name"]: a["kind"] for a in res.spec["args"]}
    if "group" in kinds:
        assert kinds["group"] == "group"
    if name == "a2a_splits":
        assert kinds["input_splits"] == "splits" and 4 in res.world_sizes
    if name == "parallel_state":
        assert "megatron.core.parallel_state" in res.stubbed


@pytest.mark.parametrize("name,reason", [("loops", "timeout"), ("allocates", "memory_limit"),
                                         ("writes", "sandbox_violation: write outside"),
                                         ("spawns", "sandbox_violation: forbidden operation")])
def test_hostile_candidates_are_stopped_and_reported(name, reason):
    cand, text = candidate(name)
    res = synthesize(cand, text, Budget(seconds=20, attempts=3, attempt_timeout_s=3, mem_mb=256))
    assert not res.accepted
    assert res.reason.startswith(reason), res.reason
    assert not os.path.exists("/tmp/mgbench_harness_escape.txt")
