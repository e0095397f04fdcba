"""The PKB-faithful application families (suite pkb, rows 63-66, 68, 79-84 of taxonomy/peers/pkb.yaml):
each claims exactly its row, generates only under --suite pkb, passes CPU validation at world size 2
(one dtype per variant, one rank pool), rejects degenerate candidates, takes the peer's argument kinds
(Python lists, ints, floats, bools, None at the peer's positions), and rejects a reference missing a
step."""

from __future__ import annotations

import pytest
import torch
from family_checks import FamilySet, assert_all_pass, assert_degenerate_rejected, eval_mutant, validate_records

from mgbench.generator import generate

ROWS = {
    "pkb_deepmd_kalman_filter_optimizer": 63,
    "pkb_gnn_neighbor_sampling": 64,
    "pkb_gnn_feature_exchange_all2all": 65,
    "pkb_gnn_feature_exchange_all2all_backward": 66,
    "pkb_gnn_sparse_feature_fetch_projection": 68,
    "pkb_dinov2_distributed_knn": 79,
    "pkb_dinov2_distributed_sinkhorn_knopp": 80,
    "pkb_sam3_allgather_iou_suppression": 81,
    "pkb_vocab_parallel_log_prob_topk": 82,
    "pkb_vocab_parallel_log_prob_topk_chunked": 83,
    "pkb_vocab_parallel_log_prob_topk_chunked_backward": 84,
}
# (task, text of the reference, replacement): a step the peer's reference takes, left out
MUTANTS = {
    "no_nucleus_filter": (
        "l2-pkb_vocab_parallel_log_prob_topk-topk_topp-bf16",
        "_sampling_filter(full, top_k, top_p)[0].float()",
        "full.float()",
    ),
    "reverse_ignored": (
        "l2-pkb_sam3_allgather_iou_suppression-reverse-bf16",
        "t[:, None] < t[None, :] if reverse else",
        "t[:, None] < t[None, :] if not reverse else",
    ),
    "no_shift": ("l2-pkb_gnn_feature_exchange_all2all-bf16", "cut = len(chunks) - rank", "cut = len(chunks)"),
}


@pytest.fixture(scope="module")
def apps(tmp_path_factory) -> FamilySet:
    out = tmp_path_factory.mktemp("pkb_apps")
    records, skips = generate(
        out, families=list(ROWS), dtypes=["bfloat16", "float32", "float64", "int64"], suites=("pkb",)
    )
    chosen = {}
    for r in records:  # one dtype per (family, variant): bf16 where offered
        chosen.setdefault((r.spec["family"], r.spec.get("variant")), r)
    picked = list(chosen.values())
    return FamilySet(out, picked, skips, validate_records(out, picked, 2))


def test_every_task_passes_and_rejects_degenerate_outputs(apps):
    assert not apps.skips
    assert {r.spec["family"] for r in apps.records} == set(ROWS)
    assert_all_pass(apps.records, apps.results, min_tasks=len(ROWS) + 3)
    assert_degenerate_rejected(apps.results)


def test_scalar_and_list_arguments_sit_at_the_peers_positions(apps):
    def inputs(task, rank=0, ws=2):
        return apps.module(task).make_inputs(rank, ws, seed=3, device="cpu", size="smoke")

    lp = inputs("l2-pkb_vocab_parallel_log_prob_topk-topp_only-bf16")
    assert lp[2] is None and lp[3] is None and isinstance(lp[4], float) and lp[4] < 1.0
    ck = inputs("l2-pkb_vocab_parallel_log_prob_topk_chunked_backward-bf16", ws=4)
    assert ck[2].dtype == torch.bfloat16 and ck[3] is None and isinstance(ck[4], int) and isinstance(ck[6], int)
    assert ck[6] % 4 == 0  # chunk_size: a multiple of W, as the peer's builder derives it
    knn = inputs("l2-pkb_dinov2_distributed_knn-bf16")
    assert isinstance(knn[3], int) and knn[4] is None and knn[2].dtype == torch.int64
    sk = inputs("l2-pkb_dinov2_distributed_sinkhorn_knopp-fp32")
    assert isinstance(sk[1], float) and isinstance(sk[3], int) and int(sk[2]) == sk[0].shape[0]
    sam = inputs("l2-pkb_sam3_allgather_iou_suppression-recent-bf16", ws=4)
    assert isinstance(sam[2], list) and all(isinstance(c, int) for c in sam[2]) and sam[1].dtype == torch.bfloat16
    assert isinstance(sam[4], float) and sam[5] is False and sam[6] is None
    ex = inputs("l2-pkb_gnn_feature_exchange_all2all_backward-fp32", ws=4)
    assert isinstance(ex[2], int) and ex[3] == ex[4] == [ex[0].shape[0] // 4] * 4 and ex[0].dtype == torch.float32
    kf = inputs("l2-pkb_deepmd_kalman_filter_optimizer-fp64")
    assert all(isinstance(kf[i], list) for i in (0, 2, 3)) and isinstance(kf[4], float) and isinstance(kf[5], float)
    ns = inputs("l3-pkb_gnn_neighbor_sampling-i64")
    assert isinstance(ns[1], list) and ns[5] is None and ns[6] is False and ns[2].dtype == torch.int64
    ff = inputs("l2-pkb_gnn_sparse_feature_fetch_projection-bf16", ws=4)
    assert isinstance(ff[3], int) and ff[4] is None and ff[1].dtype == torch.int64
    assert torch.bincount(ff[1] // (ff[3] // 4), minlength=4).tolist() == [ff[1].shape[0] // 4] * 4  # even


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_reference_missing_a_step_is_rejected(apps, tmp_path, name):
    rec = eval_mutant(apps.out, *MUTANTS[name], tmp_path, seed=1234)
    assert rec["status"] == "incorrect", (name, rec["status"], rec["reason"])
