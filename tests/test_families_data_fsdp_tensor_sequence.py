"""The data, FSDP/ZeRO, tensor and sequence parallelism families: they generate, pass CPU validation at
world size 2 (one rank pool), reject degenerate candidates, and their composition rules skip impossible
world sizes with a stated reason."""

from __future__ import annotations

import pytest
from family_checks import assert_all_pass, assert_degenerate_rejected, assert_dims_covered, family_suite

from mgbench.generator.spec import world_size_problem
from mgbench.taxonomy import load_taxonomy

FAMILIES_BY_DIM = {
    "data": ["dp_grad_allreduce", "dp_grad_bucketed", "dp_loss_metrics", "dp_norm_backward"],
    "fsdp": ["fsdp_zero3_linear", "fsdp_grad_reduce_scatter", "fsdp_zero1_adam", "fsdp_grad_clip"],
    "tensor": ["tp_mlp_swiglu", "tp_attention", "tp_vocab_cross_entropy", "tp_norm", "tp_gemv_col", "tp_gemv_row"],
    "sequence": ["sp_norm_allgather", "sp_rope", "sp_mlp_block"],
}
FAMILIES = [f for fams in FAMILIES_BY_DIM.values() for f in fams]


@pytest.fixture(scope="module")
def tax():
    return load_taxonomy()


suite = family_suite("data_fsdp_tensor_sequence", FAMILIES)


def test_every_dim_has_its_families(suite):
    assert_dims_covered(suite.records, suite.skips, FAMILIES_BY_DIM)
    for r in suite.records:
        assert {"bfloat16", "float16", "float32"} >= {r.spec["dtype"]}


def test_every_task_passes_at_world_size_2(suite):
    assert_all_pass(suite.records, suite.results, 100)


def test_degenerate_candidates_are_rejected(suite):
    assert_degenerate_rejected(suite.results)


def test_comm_heavy_families_have_latency_and_bandwidth_points(tax):
    for fam in (
        "dp_grad_allreduce",
        "dp_grad_bucketed",
        "fsdp_grad_reduce_scatter",
        "fsdp_zero1_adam",
        "sp_norm_allgather",
    ):
        assert set(tax.families[fam].scales) == {"lat", "bw"}, fam


@pytest.mark.parametrize(
    "family, ws, words",
    [
        ("tp_attention", 16, "heads=8 is not divisible by tensor=16"),
        ("tp_mlp_swiglu", 3, "not divisible by tensor=3"),
        ("tp_norm", 3, "d=64 is not divisible by tensor=3"),
        ("sp_rope", 3, "s=32 is not divisible by sequence=3"),
        ("fsdp_zero3_linear", 3, "d=64 is not divisible by fsdp=3"),
        ("fsdp_zero1_adam", 3, "not divisible by fsdp=3"),
    ],
)
def test_composition_rules_state_why_a_world_size_is_skipped(tax, family, ws, words):
    fam = tax.families[family]
    why = world_size_problem(fam, tax, ws, fam.sizes)
    assert why and words in why
    assert world_size_problem(fam, tax, 4, fam.sizes) is None
