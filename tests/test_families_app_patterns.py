"""Application-level distributed patterns matched to ParallelKernelBench problems (vision, video
VAE, spherical convolution, Gaussian splatting, GNN sampling, TorchRec KJT, RL log-probs, sample
sort, Muon, Kalman filter): every task passes CPU validation at world size 2 (one rank pool) and
rejects degenerate candidates; integer outputs are exact; a reference missing one essential
step (a collective, a filter, a permutation, a redistribution) is rejected by the oracle; the
pure index helpers (KJT recat, sort target ranges, lexicographic sample order) hold for any
input (hypothesis)."""

from __future__ import annotations

import pytest
import torch
from family_checks import assert_all_pass, assert_degenerate_rejected, eval_mutant, family_suite
from hypothesis import given, settings
from hypothesis import strategies as st

FAMILIES = [
    "dino_sinkhorn",
    "conv3d_input_parallel",
    "sam3_mask_suppression",
    "dino_knn",
    "magi1_tile_vae_decode",
    "muon_newton_schulz_tp",
    "kalman_filter_dist",
    "sample_sort_exact",
    "logprob_topk_a2a",
    "gnn_negative_ranking",
    "gnn_neighbor_sampling",
    "torchrec_kjt_all_to_all",
    "gsplat_distributed_projection",
    "disco_s2_conv",
    "halo_conv2d",
]
EXACT = ("l2-sample_sort_exact-", "l2-torchrec_kjt", "l2-gnn_negative_ranking", "l3-gnn_neighbor_sampling")


apps = family_suite("app_patterns", FAMILIES)


def test_every_task_passes_at_world_size_2(apps):
    _, records, skips, results = apps
    assert not skips and {r.spec["family"] for r in records} == set(FAMILIES)
    assert_all_pass(records, results, 38)
    assert_degenerate_rejected(results)


def test_integer_outputs_are_exact(apps):
    exact = [r for r in apps[3] if r.task_id.startswith(EXACT)]
    assert len(exact) >= 8 and all(r.max_error == 0.0 for r in exact)


# (task, text of the reference, replacement): each drops one step the production code needs.
MUTANTS = {
    "sinkhorn_no_row_all_reduce": ("l2-dino_sinkhorn-fp32", "        dist.all_reduce(rows)\n", ""),
    "conv3d_no_partial_sum": ("l2-conv3d_input_parallel-fp32", "    dist.all_reduce(out, op=dist.ReduceOp.SUM)\n", ""),
    "knn_owner_queries_not_broadcast": (
        "l2-dino_knn-fp32",
        "        dist.broadcast(queries, src=owner)\n",
        "        queries = test_features\n",
    ),
    "muon_gram_not_reduced": (
        "l2-muon_newton_schulz_tp-quintic-fp32",
        "        dist.all_reduce(gram, op=dist.ReduceOp.SUM)\n",
        "",
    ),
    "kalman_gain_not_reduced": ("l2-kalman_filter_dist-fp64", "    dist.all_reduce(tmp, op=dist.ReduceOp.SUM)\n", ""),
    "sort_without_redistribution": (
        "l2-sample_sort_exact-uneven-i64",
        "    return _exchange(out)\n",
        "    return merged\n",
    ),
    "logprob_without_top_p": (
        "l2-logprob_topk_a2a-forward-fp32",
        "    keep_p[:, -1] = True\n",
        "    keep_p[:] = True\n",
    ),
    "logprob_grad_of_unfiltered_softmax": (
        "l2-logprob_topk_a2a-backward-fp32",
        "        g = -torch.softmax(filtered.float(), dim=-1)\n",
        "        g = -torch.softmax(_vocab_to_seq(flat[start:end]).float(), dim=-1)\n",
    ),
    "kjt_without_recat": (
        "l2-torchrec_kjt_all_to_all-unweighted-i64",
        '    result = {"lengths": recv_lengths[order],\n'
        '              "values": _permute_segments(outs[1], recv_lengths, order)}\n',
        '    result = {"lengths": recv_lengths, "values": outs[1]}\n',
    ),
    "sampling_frontier_not_deduplicated": (
        "l3-gnn_neighbor_sampling-i64",
        "        node, frontier = _add_new(node, hop_nbr)\n",
        "        node, frontier = _add_new(node, hop_nbr)[0], hop_nbr\n",
    ),
    "disco_input_not_rotated": ("l3-disco_s2_conv-fp32", "        x = torch.roll(x, -shift, dims=2)\n", ""),
    "vae_tiles_not_blended": (
        "l3-magi1_tile_vae_decode-bf16",
        "    blended = [_blend_and_crop(decoded, i, grid, blend, keep) for i in per_rank[rank]]\n",
        "    blended = [decoded[i][:, :, :keep[0], :keep[1], :keep[2]].contiguous() for i in per_rank[rank]]\n",
    ),
    "gsplat_gaussian_ids_local": (
        "l3-gsplat_distributed_projection-fp32",
        "    first_gauss = int(n_world[:rank].sum())\n",
        "    first_gauss = 0\n",
    ),
    "halo_edges_swapped": (
        "l2-halo_conv2d-allgather-fp32",
        "    above = edges[rank - 1][1] if rank > 0 else zeros\n",
        "    above = edges[rank - 1][0] if rank > 0 else zeros\n",
    ),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_reference_missing_a_step_is_rejected(apps, tmp_path, name):
    rec = eval_mutant(apps[0], *MUTANTS[name], tmp_path, seed=1234)
    assert rec["status"] == "incorrect", (name, rec["status"], rec["reason"])


@settings(max_examples=40, deadline=None)
@given(world=st.integers(1, 6), local_split=st.integers(1, 4), batches=st.lists(st.integers(0, 5), min_size=6))
def test_kjt_recat_turns_source_major_into_feature_major(apps, world, local_split, batches):
    kjt = apps.module("l2-torchrec_kjt_all_to_all-variable_batch-i64")
    b = batches[:world]
    # label every received length by (feature, source, sample) in the received (source, feature, sample) order
    received = [(f, s, i) for s in range(world) for f in range(local_split) for i in range(b[s])]
    order = kjt._recat(local_split, world, b, "cpu").tolist()
    assert sorted(order) == list(range(len(received)))
    assert [received[j] for j in order] == sorted(received)


@settings(max_examples=40, deadline=None)
@given(world=st.integers(1, 9), total=st.integers(0, 200))
def test_sort_target_ranges_tile_the_output_evenly(apps, world, total):
    sort = apps.module("l2-sample_sort_exact-uneven-i64")
    ranges = [sort._target_range(r, world, total) for r in range(world)]
    assert ranges[0][0] == 0 and ranges[-1][1] == total
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert max(e - s for s, e in ranges) - min(e - s for s, e in ranges) <= 1


@settings(max_examples=40, deadline=None)
@given(triples=st.lists(st.tuples(st.integers(-3, 3), st.integers(0, 3), st.integers(0, 50)), min_size=1, max_size=30))
def test_splitter_samples_sort_by_value_rank_position(apps, triples):
    sort = apps.module("l2-sample_sort_exact-uneven-i64")
    v, r, p = (torch.tensor(col, dtype=torch.int64) for col in zip(*triples))
    order = sort._lex_order(v, r, p).tolist()
    assert [triples[i] for i in order] == sorted(triples)
