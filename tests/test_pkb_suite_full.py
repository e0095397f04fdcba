"""PKB-faithful suite, group "full" (taxonomy/families/pkb_full.yaml): ParallelKernelBench rows 10, 11,
36, 37, 38, 54, 67 and 70 in the peer's own form. Each family claims exactly its row in suite pkb, renders
only when the suite is asked for, passes CPU validation at world size 2 in one rank pool with degenerate
candidates rejected, takes the peer's Python arguments at the peer's positions, and rejects what the core
family of the same row returns where the two differ."""

from __future__ import annotations

import pytest
import torch
from family_checks import assert_all_pass, assert_degenerate_rejected, eval_mutant, suite_generated, validate_generated

from mgbench.generator import generate
from mgbench.generator.generate import GenerateError
from mgbench.validation.compare import Tolerance, compare
from mgbench.validation.contract import load_module

ROWS = {
    36: "pkb_ulysses_gather_seq_scatter_heads",
    37: "pkb_ulysses_gather_heads_scatter_seq",
    38: "pkb_ulysses_gather_seq_scatter_heads_qkv",
    67: "pkb_gnn_sparse_embedding_all2all",
    70: "pkb_torchrec_kjt_all2all",
    11: "pkb_allgather_gemm_at",
    10: "pkb_embedding_lookup",
    54: "pkb_ring_attention",
}
# the arguments after the tensors, as ParallelKernelBench's input builder passes them
PEER_ARGS = {
    36: (1, 2, None, 0),
    37: (1, 2, None),
    38: (1, None, None, True),
    67: (None,),  # after num_nodes (an int, checked below)
    54: (None, True, None),
}


generated = suite_generated("pkb_full", list(ROWS.values()), ["float32", "int64"])


@pytest.fixture(scope="module")
def validated(generated):
    return generated[1], validate_generated(generated)


def _module(generated, family):
    out, recs = generated
    return load_module(out / next(r["module"] for r in recs if r["family"] == family))


def test_the_core_run_refuses_a_pkb_family(tmp_path):
    with pytest.raises(GenerateError, match="pkb"):
        generate(tmp_path, families=[ROWS[36]], dtypes=["float32"], check_import=False)


def test_every_task_passes_at_two_ranks_and_rejects_degenerate_candidates(validated):
    recs, results = validated
    assert {r["family"] for r in recs} == set(ROWS.values())
    assert_all_pass(recs, results, len(ROWS))
    assert_degenerate_rejected(results)


def test_inputs_carry_the_peers_python_arguments(generated):
    for n, args in PEER_ARGS.items():
        inp = _module(generated, ROWS[n]).make_inputs(1, 4, seed=5, device="cpu", size="smoke")
        assert tuple(inp[-len(args) :]) == args, n
    gnn = _module(generated, ROWS[67]).make_inputs(0, 2, seed=5, device="cpu", size="smoke")
    assert isinstance(gnn[2], int) and int(gnn[0].max()) < gnn[2] and gnn[0].dtype == torch.int64
    kjt = _module(generated, ROWS[70]).make_inputs(0, 4, seed=5, device="cpu", size="smoke")
    lengths, values, key_splits, batch, pg = kjt
    assert key_splits == [1, 2, 3, 1] and isinstance(batch, int) and pg is None
    assert lengths.dtype == values.dtype == torch.int64 and lengths.numel() == sum(key_splits) * batch
    assert int(lengths.sum()) == values.numel()


def test_row_11_b_is_drawn_per_rank(generated):
    mod = _module(generated, ROWS[11])
    b0, b1 = (mod.make_inputs(r, 2, seed=3, device="cpu", size="smoke")[1] for r in (0, 1))
    assert not torch.equal(b0, b1)


def test_row_10_rows_in_index_order_are_rejected(generated):
    """The peer returns the looked-up rows grouped by owner rank; the core family's index order fails here."""
    mod = _module(generated, ROWS[10])
    inputs = [mod.make_inputs(r, 4, seed=3, device="cpu", size="smoke") for r in range(4)]
    expected = mod.oracle(inputs, 4)
    idx, shard = inputs[0]
    table = torch.cat([inp[1].double() for inp in inputs])
    in_order = table[idx]
    assert not torch.equal(in_order, expected[0])
    assert not compare(in_order, expected[0], Tolerance(rtol=1.3e-5, atol_rel=1e-3), exact_dtype=False)[0]


def test_a_kjt_without_the_recat_is_rejected(generated, tmp_path):
    """Leaving the received bags in (source rank, feature) order must fail."""
    out, recs = generated
    task = next(r["task_id"] for r in recs if r["family"] == ROWS[70])
    rec = eval_mutant(
        out,
        task,
        "order = [seg_of[(j, f)] for f in range(local) for j in order_src]",
        "order = list(range(len(len_segs)))",
        tmp_path,
    )
    assert rec["status"] == "incorrect", rec
