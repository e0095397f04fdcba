"""PKB-faithful suite, rows whose core family draws replicated inputs or drops arguments the peer takes
(taxonomy/families/pkb_more.yaml): every family is in suite pkb and claims exactly its
ParallelKernelBench row, passes CPU validation at world size 2, rejects the degenerate candidates, takes
its inputs in the peer's kinds (per-rank weights, scalar and None arguments at the peer's positions),
and a reference missing a step is judged wrong."""

from __future__ import annotations

import pytest
import torch
from family_checks import assert_all_pass, assert_degenerate_rejected, eval_mutant, suite_generated, validate_generated

from mgbench.validation.contract import load_module

ROWS = {
    "pkb_allgather_gemm": 12,
    "pkb_gemm_allgather": 14,
    "pkb_combined_sharded_gemms": 15,
    "pkb_importance_sampling_loss": 25,
    "pkb_hyena_forward_cp": 72,
    "pkb_distributed_sample_sort": 85,
}
# a step of the reference replaced by a wrong one: (task, old, new)
MUTANTS = {
    "is_loss_ignores_no_token": (
        "l3-pkb_importance_sampling_loss-fp32",
        "keep = labels != ignore_index",
        "keep = labels != -1",
    ),
    "hyena_always_zigzag": (
        "l3-pkb_hyena_forward_cp-contiguous-fp32",
        "(_to_channel_shard(t, world, with_zigzag_splitting)",
        "(_to_channel_shard(t, world, True)",
    ),
    "sort_without_redistribution": (
        "l2-pkb_distributed_sample_sort-odd_empty-fp32",
        "return _exchange(out_chunks, group)",
        "return merged",
    ),
    "gemm_ag_own_product_only": (
        "l2-pkb_gemm_allgather-fp32",
        "return torch.cat(parts, dim=1)",
        "return torch.cat([c_local] * world, dim=1)",
    ),
}


generated = suite_generated("pkb_more", list(ROWS), ["float32"])


@pytest.fixture(scope="module")
def validated(generated):
    return generated[1], validate_generated(generated)


def test_every_task_passes_and_rejects_degenerate_candidates(validated):
    recs, results = validated
    assert {r["family"] for r in recs} == set(ROWS) and all(r["suite"] == "pkb" for r in recs)
    assert_all_pass(recs, results, 8)  # hyena and the sort have two variants each
    assert_degenerate_rejected(results)


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_reference_missing_a_step_is_rejected(generated, tmp_path, name):
    rec = eval_mutant(generated[0], *MUTANTS[name], tmp_path)
    assert rec["status"] == "incorrect" and "wrong output" in rec["reason"], (name, rec["reason"])


def _inputs(out, task, rank, world=2):
    mod = load_module(out / "tasks" / f"{task}.py")
    return mod, mod.make_inputs(rank, world, seed=3, device="cpu", size="smoke")


def test_inputs_have_the_peers_kinds(generated):
    out, _ = generated
    # rows 12, 14, 15: the operands the core families replicate are each rank's own
    for task, per_rank in (
        ("l2-pkb_allgather_gemm-fp32", [1]),
        ("l2-pkb_gemm_allgather-fp32", [0]),
        ("l3-pkb_combined_sharded_gemms-fp32", [1, 2]),
    ):
        _, a = _inputs(out, task, 0)
        _, b = _inputs(out, task, 1)
        for i in per_rank:
            assert a[i].shape == b[i].shape and not torch.equal(a[i], b[i]), (task, i)
    _, args = _inputs(out, "l3-pkb_importance_sampling_loss-fp32", 0)
    assert len(args) == 6 and args[5] == -100 and type(args[5]) is int
    assert args[2].dtype == torch.int64 and all(t.dtype == torch.float32 for t in args[:2] + args[3:5])
    mod, _ = _inputs(out, "l3-pkb_importance_sampling_loss-fp32", 0)
    assert mod.oracle([mod.make_inputs(r, 2, seed=3, device="cpu", size="smoke") for r in range(2)], 2)[0][1] is None
    for variant, flag in (("zigzag", True), ("contiguous", False)):
        _, args = _inputs(out, f"l3-pkb_hyena_forward_cp-{variant}-fp32", 1)
        assert len(args) == 9 and args[5:7] == (8, 2) and args[7] is None and args[8] is flag
        assert args[3].shape == (8, 24)  # filter length independent of the sequence
    even = [_inputs(out, "l2-pkb_distributed_sample_sort-even-fp32", r, 4)[1] for r in range(4)]
    assert len({a[0].numel() for a in even}) == 1 and all(a[1] is None for a in even)
    assert even[0][0].dtype == torch.float32 and bool((even[0][0] == even[0][0].round()).all())
    odd = [_inputs(out, "l2-pkb_distributed_sample_sort-odd_empty-fp32", r, 4)[1][0].numel() for r in range(4)]
    assert odd[1] == odd[3] == 0 and odd[0] == odd[2] > 0
