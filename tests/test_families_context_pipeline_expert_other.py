"""The context-ring, Ulysses, pipeline, expert and other-pattern parallelism families: they generate,
pass CPU validation at world size 2 (one rank pool), reject degenerate candidates, and their composition
rules skip impossible world sizes with a stated reason."""

from __future__ import annotations

import pytest
from family_checks import assert_all_pass, assert_degenerate_rejected, assert_dims_covered, family_suite

from mgbench.generator.spec import world_size_problem
from mgbench.taxonomy import load_taxonomy

FAMILIES_BY_DIM = {
    "context_ring": ["ring_attention", "kv_allgather_attention", "decode_lse_merge"],
    "context_ulysses": ["ulysses_a2a", "ulysses_sdpa", "ulysses_attention"],
    "pipeline": ["pp_chain", "pp_gpipe", "pp_gpipe_loss", "pp_interleaved"],
    "expert": ["moe_balanced", "moe_wide", "moe_narrow", "moe_capacity", "moe_allgather"],
    "other": [
        "halo_conv1d",
        "halo_conv2d",
        "sample_sort",
        "fft2d",
        "quant_allgather",
        "quant_reduce_scatter",
        "vocab_topk",
        "vocab_logprob",
        "clip_loss",
    ],
}
FAMILIES = [f for fams in FAMILIES_BY_DIM.values() for f in fams]


suite = family_suite("context_pipeline_expert_other", FAMILIES)


def test_every_dim_has_its_families(suite):
    assert_dims_covered(suite.records, suite.skips, FAMILIES_BY_DIM)


def test_every_task_passes_at_world_size_2(suite):
    assert_all_pass(suite.records, suite.results, 101)


def test_degenerate_candidates_are_rejected(suite):
    assert_degenerate_rejected(suite.results)


def test_exact_outputs_for_integer_and_quantized_tasks(suite):
    exact = [r for r in suite.results if r.task_id.startswith(("l2-sample_sort", "l2-vocab_topk-fp32"))]
    assert exact and all(r.max_error == 0.0 for r in exact)


@pytest.mark.parametrize(
    "family, ws, words",
    [
        ("ulysses_sdpa", 3, "not divisible by context_ulysses=3"),
        ("ring_attention", 3, "not divisible by context_ring=3"),
        ("moe_wide", 32, "experts=16 is not divisible by expert=32"),
        ("fft2d", 6, "not divisible by other=6"),
        ("pp_chain", 1, "pipeline needs mesh size >= 2"),
    ],
)
def test_composition_rules_state_why_a_world_size_is_skipped(family, ws, words):
    tax = load_taxonomy()
    fam = tax.families[family]
    why = world_size_problem(fam, tax, ws, fam.sizes)
    assert why and words in why
    assert world_size_problem(fam, tax, 4, fam.sizes) is None


@pytest.mark.parametrize("family", ["quant_allgather", "quant_reduce_scatter"])
def test_an_all_zero_block_quantizes_to_zeros_not_nan(suite, family):
    """An all-zero block has scale 0: production quantizers divide it by 1 (codes 0), never 0/0."""
    import torch

    for rec in [r for r in suite.records if r.spec["family"] == family]:
        mod = suite.module(rec.task_id)
        x = torch.randn(4 * mod.BLOCK)
        x[mod.BLOCK : 2 * mod.BLOCK] = 0.0
        codes, scale = mod._quantize(x)
        y = mod._dequantize(codes, scale)
        assert torch.isfinite(y).all() and (y[mod.BLOCK : 2 * mod.BLOCK] == 0).all(), rec.task_id
