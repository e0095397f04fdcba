"""PKB-faithful suite, MoE rows (taxonomy/families/pkb_moe.yaml): every family is in suite pkb and
claims exactly its ParallelKernelBench row, renders only with --suite pkb, passes CPU validation (world
size 2 for all, 4 as well for the narrow layout, whose EP sub-groups only exist there), rejects the
degenerate candidates, takes its inputs in the peer's kinds, and a reference missing a step is judged
wrong."""

from __future__ import annotations

import pytest
import torch
from family_checks import assert_all_pass, assert_degenerate_rejected, eval_mutant, suite_generated, validate_generated

from mgbench.validation.contract import load_module

ROWS = {
    "pkb_moe_token_preprocess": 26,
    "pkb_moe_pre_all2all": 28,
    "pkb_moe_post_all2all": 29,
    "pkb_fused_moe_fwd": 31,
    "pkb_fused_moe_fwd_lora": 32,
    "pkb_moe_ep_balanced": 49,
    "pkb_moe_ep_wide": 50,
    "pkb_moe_ep_narrow": 51,
}
# a step of the reference replaced by a wrong one: (task, old, new)
MUTANTS = {
    "dispatch_no_regroup": (
        "l2-pkb_moe_pre_all2all-fp32",
        "order = [s * per + e for e in range(per) for s in range(ep)]",
        "order = list(range(per * ep))",
    ),
    "combine_ungated": (
        "l3-pkb_fused_moe_fwd-fp32",
        "weight = dense.t().masked_select(hits.bool())",
        "weight = torch.ones(mapping.shape[0], dtype=gates.dtype)",
    ),
}


generated = suite_generated("pkb_moe", list(ROWS), ["float32"])


@pytest.fixture(scope="module")
def validated(generated):
    res = validate_generated(generated) + validate_generated(generated, 4, family="pkb_moe_ep_narrow")
    return generated[1], res


def test_every_task_passes_and_rejects_degenerate_candidates(validated):
    recs, results = validated
    assert {r["family"] for r in recs} == set(ROWS) and all(r["suite"] == "pkb" for r in recs)
    narrow = [r for r in recs if r["family"] == "pkb_moe_ep_narrow"]
    assert_all_pass(recs + narrow, results, 9)  # the narrow task also at 4 ranks
    assert sorted(r.world_size for r in results if "narrow" in r.task_id) == [2, 4]
    assert_degenerate_rejected(results)


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_reference_missing_a_step_is_rejected(generated, tmp_path, name):
    rec = eval_mutant(generated[0], *MUTANTS[name], tmp_path)
    assert rec["status"] == "incorrect" and "wrong output" in rec["reason"], (name, rec["reason"])


def test_inputs_have_the_peers_kinds(generated):
    out, _ = generated
    mod = load_module(out / "tasks" / "l2-pkb_moe_pre_all2all-fp32.py")
    hidden, mask, experts, sends, recvs, table, group = mod.make_inputs(0, 2, seed=3, device="cpu", size="smoke")
    m = mod.SIZES["smoke"]["m"]
    assert mask.shape == (8, 2, m) and mask.dtype == torch.float32 and experts == 8 and group is None
    assert type(sends) is list and type(recvs) is list and all(type(v) is int for v in sends + recvs)
    assert sum(sends) == 2 * m and table.dtype == torch.int64 and table.shape == (2, 4)
    assert len({tuple(mod.make_inputs(0, 2, seed=s, device="cpu", size="smoke")[3]) for s in range(6)}) > 1
    post = load_module(out / "tasks" / "l2-pkb_moe_post_all2all-fp32.py")
    args = post.make_inputs(1, 2, seed=3, device="cpu", size="smoke")
    assert args[2].dtype == torch.int64 and args[7].dtype == torch.bool and args[9] == (m, 32)
    fused = load_module(out / "tasks" / "l3-pkb_fused_moe_fwd_lora-fp32.py")
    args = fused.make_inputs(0, 2, seed=3, device="cpu", size="smoke")
    gate_proj, down_proj = args[3], args[5]
    assert [tuple(t.shape) for t in gate_proj] == [(16, 32), (16,)] and tuple(down_proj[0].shape) == (32, 16)
    assert args[-3:] == (8, 2, None)
    other = fused.make_inputs(1, 2, seed=3, device="cpu", size="smoke")
    assert not torch.equal(args[1], other[1])  # each rank its own router, as the peer seeds ranks apart
