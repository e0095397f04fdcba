"""Production-pattern families (beyond ParallelKernelBench): each names the production code it models,
states the trade-off it exercises, generates at world sizes 2, 4, 8, passes CPU validation at world
size 2 (one rank pool, one dtype per family to keep CI short) and rejects degenerate candidates;
exact-output families match their oracle exactly."""

from __future__ import annotations

import pytest
from family_checks import assert_all_pass, assert_degenerate_rejected, family_suite

from mgbench.generator.spec import world_size_problem
from mgbench.taxonomy import load_taxonomy

PRODUCTION = {
    "inference": [
        "deepep_moe",
        "allreduce_add_rmsnorm",
        "fp8_blockwise_gemm_rs",
        "kv_transfer_paged",
        "dcp_mla_decode",
    ],
    "longctx": ["varlen_ring_attention", "mamba2_cp_scan"],
    "optim": ["powersgd", "diloco_outer", "shampoo_blocks"],
    "rl": ["grpo_advantage", "rl_weight_reshard"],
    "training": ["aux_free_bias", "sync_batchnorm", "pp_1f1b"],
    "spectral": ["fft3d_pencil"],
}
ALL = [f for fams in PRODUCTION.values() for f in fams]
TRADE_OFF_WORDS = ("Trade-off exercised",)
# Families whose outputs are copies or discrete choices: the reference must equal the oracle exactly.
EXACT = ("l2-kv_transfer_paged", "l2-rl_weight_reshard")


def _first_per_variant(records):
    """One dtype per (family, variant, scale) keeps CI time small; `mgbench validate` runs the matrix."""
    seen, keep = set(), []
    for r in records:
        key = (r.spec["family"], r.spec["variant"], r.spec["scale"])
        if key not in seen:
            seen.add(key)
            keep.append(r)
    return keep


production = family_suite("production", ALL, dtypes=["bfloat16", "float32"], choose=_first_per_variant)


def test_every_family_names_the_code_it_models_and_its_trade_off():
    tax = load_taxonomy()
    for fid in ALL:
        fam = tax.families[fid]
        assert fam.models, fid
        assert any(m["file"].split("/")[-1] in " ".join(fam.description.split()) for m in fam.models), fid
        assert any(w in fam.description for w in TRADE_OFF_WORDS), fid
        assert fam.source_file.endswith(tuple(f"/{group}.yaml" for group in PRODUCTION)), fid


def test_every_family_runs_at_world_sizes_2_4_8(production):
    assert not production.skips
    assert {r.spec["family"] for r in production.records} == set(ALL)
    assert all(r.spec["world_sizes"] == [2, 4, 8] for r in production.records)


def test_every_task_passes_at_world_size_2(production):
    assert_all_pass(production.records, production.results, len(ALL))


def test_degenerate_candidates_are_rejected(production):
    assert_degenerate_rejected(production.results)


def test_copies_and_discrete_choices_match_exactly(production):
    exact = [r for r in production.results if r.task_id.startswith(EXACT)]
    assert len(exact) == len(EXACT) and all(r.max_error == 0.0 for r in exact)


@pytest.mark.parametrize(
    "family, ws, words",
    [
        ("deepep_moe", 3, "experts=16 is not divisible by expert=3"),
        ("dcp_mla_decode", 3, "heads=8 is not divisible by context_ring=3"),
        ("fft3d_pencil", 3, "n=8 is not divisible by world=3"),
        ("shampoo_blocks", 16, "blocks=8 is not divisible by data=16"),
    ],
)
def test_impossible_world_sizes_are_skipped_with_a_reason(family, ws, words):
    tax = load_taxonomy()
    fam = tax.families[family]
    why = world_size_problem(fam, tax, ws, fam.sizes)
    assert why and words in why
