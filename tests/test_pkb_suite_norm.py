"""The PKB suite, group norm: families reproducing ParallelKernelBench rows 18, 19, 20, 24, 44, 45, 46, 58,
73, 76 and 87 in the peer's own form. Each claims exactly its row inside suite pkb, generates only when the
suite is asked for, passes CPU validation at world size 2 (one rank pool, one dtype each) with degenerate
candidates rejected, passes scalar arguments as Python values at the peer's positions, and a reference
missing one step of the peer's computation is judged incorrect."""

from __future__ import annotations

import pytest
import torch
from family_checks import assert_all_pass, assert_degenerate_rejected, eval_mutant, validate_records

from mgbench.generator import generate
from mgbench.store import load_manifest
from mgbench.validation.contract import load_module

ROWS = {
    18: "pkb_tp_rms_norm",
    19: "pkb_blocked_fp8_quantize",
    20: "pkb_blocked_fp8_dequantize",
    24: "pkb_load_balancing_loss_fn",
    44: "pkb_quantized_grad_allreduce",
    45: "pkb_reducescatter_fused_rmsnorm",
    46: "pkb_gemv_decode",
    58: "pkb_openclip_contrastive_loss",
    73: "pkb_vocab_parallel_cross_entropy_loss",
    76: "pkb_opensora_conv3d_allreduce",
    87: "pkb_conv2d_boundary_exchange",
}
FAMILIES = sorted(ROWS.values())


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("pkb_norm")
    records, _ = generate(out, families=FAMILIES, dtypes=["bfloat16"], suites=("pkb",))
    return out, load_manifest(out), records


@pytest.fixture(scope="module")
def validated(generated):
    out, _, records = generated
    return records, validate_records(out, records, world_size=2)


def _module(generated, task_id):
    out, recs, _ = generated
    return load_module(out / next(r["module"] for r in recs if r["task_id"] == task_id))


def test_the_core_suite_does_not_render_them(tmp_path):
    records, _ = generate(tmp_path, families=["tp_norm"], dtypes=["float32"], check_import=False)
    assert records and not any(r.spec["family"].startswith("pkb_") for r in records)


def test_every_task_passes_and_rejects_degenerate_candidates(validated):
    records, results = validated
    assert_all_pass(records, results, 13)
    assert_degenerate_rejected(results)


def test_scalar_arguments_are_python_values_at_the_peers_positions(generated):
    def inputs(task):
        return _module(generated, task).make_inputs(0, 2, seed=5, device="cpu", size="smoke")

    x, w, eps = inputs("l2-pkb_tp_rms_norm-bf16")
    assert x.dim() == 2 and w.dim() == 1 and type(eps) is float
    logits, experts, top_k, mask = inputs("l2-pkb_load_balancing_loss_fn-bf16")
    assert (type(experts), type(top_k), mask) == (int, int, None) and logits.shape[1] == experts
    flat, block = inputs("l2-pkb_quantized_grad_allreduce-bf16")
    assert flat.dim() == 1 and type(block) is int and flat.numel() % block  # a partial last block
    y, s, block = inputs("l2-pkb_blocked_fp8_dequantize-bf16")
    assert y.dim() == 3 and s.dtype == y.dtype == torch.bfloat16 and type(block) is int
    x, block = inputs("l2-pkb_blocked_fp8_quantize-bf16")
    assert x.dim() == 2 and type(block) is int
    assert (x.float().view(x.shape[0], -1, block).abs().amax(dim=2) == 0).any()  # the zero-block guard is needed
    buf, gamma, eps = inputs("l2-pkb_reducescatter_fused_rmsnorm-bf16")
    assert buf.dim() == 1 and gamma.dim() == 1 and type(eps) is float
    img, txt, scale, bias, group = inputs("l2-pkb_openclip_contrastive_loss-bf16")
    assert (type(scale), type(bias), group) == (float, float, None)
    logits, target, group = inputs("l2-pkb_vocab_parallel_cross_entropy_loss-bf16")
    assert logits.dim() == 3 and target.shape == logits.shape[:2] and target.dtype == torch.int64 and group is None
    conv = inputs("l2-pkb_opensora_conv3d_allreduce-strided-bf16")
    assert conv[3:] == (2, 1, 2, 1, None)
    halo = inputs("l2-pkb_conv2d_boundary_exchange-strided-bf16")
    assert halo[3:] == (2, 2, None) and halo[1].shape[-1] == 5


def test_fp8_codes_of_a_zero_block_are_zero_not_nan(generated):
    mod = _module(generated, "l2-pkb_blocked_fp8_quantize-bf16")
    inputs = [mod.make_inputs(r, 2, seed=9, device="cpu", size="smoke") for r in range(2)]
    codes, scales = mod.oracle(inputs, 2)[0]
    assert torch.isfinite(codes).all() and (scales == 0).any()


class _OneRank:
    """Stands in for torch.distributed in one process at world size 1 (all_gather copies)."""

    @staticmethod
    def get_world_size(group=None):
        return 1

    @staticmethod
    def all_gather(outs, t, group=None):
        outs[0].copy_(t)


def test_fp8_quantize_without_the_zero_block_guard_gives_nan_codes(generated, tmp_path):
    """The peer divides an all-zero block by 1: a reference without that guard returns NaN codes there,
    where the oracle has zeros (checked in one process; `mgbench eval` cannot judge float8 outputs yet, its
    NaN check calls isfinite, which float8 lacks)."""
    out, recs, _ = generated
    source = (out / next(r["module"] for r in recs if r["task_id"] == "l2-pkb_blocked_fp8_quantize-bf16")).read_text()
    guard = "safe = torch.where(scale == 0, torch.ones_like(scale), scale)"
    assert source.count(guard) == 1
    for text, finite in ((source, True), (source.replace(guard, "safe = scale"), False)):
        path = tmp_path / f"fp8_{finite}.py"
        path.write_text(text)
        mod = load_module(path)
        mod.dist = _OneRank
        x, block = mod.make_inputs(0, 1, seed=4, device="cpu", size="smoke")
        codes, scales = mod.solution(x, block)
        expected_codes, expected_scales = mod.oracle([(x, block)], 1)[0]
        assert (expected_scales == 0).any() and torch.isfinite(expected_codes).all()
        assert bool(torch.isfinite(codes.float()).all()) is finite
        assert torch.equal(codes.double(), expected_codes) is finite


# a reference missing one step of the peer's computation: the judge must call it incorrect
MUTANTS = {
    "rmsnorm_without_gamma": ("l2-pkb_reducescatter_fused_rmsnorm-bf16", " * gamma.float()", ""),
    "ce_target_logit_not_summed_over_ranks": (
        "l2-pkb_vocab_parallel_cross_entropy_loss-bf16",
        "dist.all_reduce(picked, op=dist.ReduceOp.SUM, group=group)",
        "pass",
    ),
    "halo_from_wrong_side": (
        "l2-pkb_conv2d_boundary_exchange-unit-bf16",
        "above = got[rank - 1][1] if rank > 0 else zeros",
        "above = got[rank - 1][0] if rank > 0 else zeros",
    ),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_reference_missing_a_step_is_incorrect(generated, tmp_path, name):
    rec = eval_mutant(generated[0], *MUTANTS[name], tmp_path, seed=1234)
    assert rec["status"] == "incorrect", (name, rec["status"], rec["reason"])
