"""The Megatron-style all-to-all token dispatcher families (moe_ep_a2a, moe_ep_a2a_stage) and the
load-balancing loss (moe_aux_loss): every task passes CPU validation at world size 2 (one rank
pool) and rejects degenerate candidates; the count exchange is exact and its splits are the
router's (uneven, conserved); wrong dispatcher answers are caught by the oracle."""

from __future__ import annotations

import pytest
import torch
from family_checks import assert_all_pass, assert_degenerate_rejected, eval_mutant, family_suite
from hypothesis import given, settings
from hypothesis import strategies as st

FAMILIES = ["moe_ep_a2a", "moe_ep_a2a_stage", "moe_aux_loss"]


moe = family_suite("moe_dispatcher", FAMILIES)


def test_every_task_passes_at_world_size_2(moe):
    out, records, skips, results = moe
    assert not skips and {r.spec["family"] for r in records} == set(FAMILIES)
    assert_all_pass(records, results, 14)
    assert_degenerate_rejected(results)


def test_count_exchange_is_exact(moe):
    results = moe[3]
    pre = [r for r in results if r.task_id.startswith("l2-moe_ep_a2a_stage-preprocess")]
    assert pre and all(r.max_error == 0.0 for r in pre)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), world=st.sampled_from([2, 4, 8]))
def test_splits_come_from_the_router_and_are_conserved(moe, seed, world):
    mod = moe.module("l2-moe_ep_a2a_stage-preprocess-bf16")
    maps = [mod.make_inputs(r, world, seed=seed, device="cpu", size="smoke")[0] for r in range(world)]
    counts = [mod._counts_of(maps, r, 8, world) for r in range(world)]
    n, k = maps[0].shape[0], mod.TOPK
    send = torch.stack([c[0] for c in counts])  # send[s, d]: copies s sends to d
    recv = torch.stack([c[1] for c in counts])  # recv[d, s]: copies d receives from s
    assert torch.equal(send.t(), recv)
    assert all(int(c[0].sum()) == n * k for c in counts)
    assert all(torch.equal(c[2].sum(dim=1), c[1]) for c in counts)


def test_splits_are_uneven_for_most_seeds(moe):
    """Never [n*k/W] * W: the router decides, so equal splits are rare coincidences."""
    mod = moe.module("l2-moe_ep_a2a_stage-preprocess-bf16")
    uneven = 0
    for seed in range(20):
        m = mod.make_inputs(0, 4, seed=seed, device="cpu", size="smoke")[0]
        uneven += len(set(m.sum(dim=0).view(4, 2).sum(dim=1).tolist())) > 1
    assert uneven >= 18


MUTANTS = {
    # gates renormalised over the top-k (Mixtral gating) where the task routes softmax-then-top-k
    "renormalised_gates": (
        "l3-moe_ep_a2a-e8-bf16",
        'if GATING == "softmax_topk":\n        gates, idx',
        "if False:\n        gates, idx",
    ),
    # combine that sums the expert outputs without weighting them by the gates
    "unweighted_combine": (
        "l2-moe_ep_a2a_stage-combine-bf16",
        "back.float() * weight.float()[:, None]",
        "back.float()",
    ),
    # each rank's own loss, never all-reduced
    "local_aux_loss": ("l2-moe_aux_loss-unmasked-fp32", "    dist.all_reduce(loss, op=dist.ReduceOp.SUM)\n", ""),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_wrong_dispatcher_answers_are_rejected(moe, tmp_path, name):
    rec = eval_mutant(moe[0], *MUTANTS[name], tmp_path)
    assert rec["status"] == "incorrect" and "wrong output" in rec["reason"], (name, rec["reason"])
