"""The PKB-faithful optimizer and gradient rows (suite pkb, taxonomy/families/pkb_optim.yaml):
ParallelKernelBench rows 21, 22, 30, 40, 41, 42, 43, 47 and 86 each claimed by exactly one family
of the suite; one dtype of every family generated and validated on gloo at world size 2 (the EP
clip also at 4, where its EP x EP-FSDP grid exists), degenerate candidates rejected, references
missing a step rejected, and the inputs of the peer's kind (scalar arguments, lists, groups)."""

from __future__ import annotations

import pytest
import torch
from family_checks import assert_all_pass, assert_degenerate_rejected, eval_mutant

from mgbench.generator import generate
from mgbench.store import load_manifest
from mgbench.validation.contract import load_module
from mgbench.validation.run import validate

ROWS = {
    40: "pkb_ddp",
    41: "pkb_zero1_optimizer_shard",
    42: "pkb_zero2_optimizer_shard_grad",
    47: "pkb_fsdp_step_e2e",
    43: "pkb_fused_adam_grad_unshard_allgather",
    21: "pkb_clip_grad_norm_no_ep",
    22: "pkb_clip_grad_norm_ep",
    30: "pkb_moe_epgroupgemm_lora_backward",
    86: "pkb_tp_muon_orthogonalization",
}
FAMILIES = list(ROWS.values())
EP_CLIP = "l3-pkb_clip_grad_norm_ep-bf16"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("pkb_optim")
    generate(out, families=FAMILIES, dtypes=["bfloat16"], suites=["pkb"])
    return out, [r for r in load_manifest(out) if r["family"] in FAMILIES]


@pytest.fixture(scope="module")
def validated(generated):
    out, recs = generated
    ids = [r["task_id"] for r in recs]
    res = validate(out, out / "r2.jsonl", world_sizes=[2], task_ids=ids, quiet=True)
    res4 = validate(out, out / "r4.jsonl", world_sizes=[4], task_ids=[EP_CLIP], quiet=True)
    return recs, res, res4


def _module(generated, task_id):
    out, recs = generated
    return load_module(out / next(r["module"] for r in recs if r["task_id"] == task_id))


def test_every_task_passes_and_rejects_degenerate_candidates(validated):
    recs, res, res4 = validated
    assert len(recs) == 16  # 8 single-task families + 8 Muon variants, bfloat16
    assert_all_pass(recs, res, 16)
    assert_all_pass([r for r in recs if r["task_id"] == EP_CLIP], res4, 1)
    assert_degenerate_rejected(res + res4)


def test_inputs_are_of_the_peers_kind(generated):
    ddp = _module(generated, "l3-pkb_ddp-bf16").make_inputs(1, 2, seed=5, device="cpu", size="smoke")
    assert len(ddp) == 19 and all(isinstance(t, torch.Tensor) for t in ddp[:14])
    lr, beta1, beta2, eps, step = ddp[14:]
    assert all(isinstance(v, float) for v in (lr, beta1, beta2, eps)) and isinstance(step, int)
    steps = {
        _module(generated, "l3-pkb_ddp-bf16").make_inputs(0, 2, seed=s, device="cpu", size="smoke")[-1]
        for s in range(40)
    }
    assert steps == set(range(1, 8))  # the peer's builder cycles step through 1..7
    fsdp = _module(generated, "l3-pkb_fsdp_step_e2e-bf16").make_inputs(0, 2, seed=5, device="cpu", size="smoke")
    assert fsdp[3] == ((32, 16), (32,), (8, 32), (8,)) and isinstance(fsdp[10], float)
    clip = _module(generated, EP_CLIP)
    for ws, ep_size in ((2, 1), (4, 2), (8, 4)):
        non_ep, ep, max_norm, p, eps_, *groups = clip.make_inputs(0, ws, seed=1, device="cpu", size="smoke")
        assert isinstance(non_ep, list) and isinstance(ep, list) and (p, eps_, groups) == (2.0, ep_size, [None] * 3)
    muon = _module(generated, "l2-pkb_tp_muon_orthogonalization-quintic_rows-bf16")
    x, steps_, kind, dim, group = muon.make_inputs(1, 4, seed=2, device="cpu", size="smoke")
    assert x.shape == (4, 32) and steps_ in (5, 10) and (kind, dim, group) == ("quintic", 0, None)


def test_ep_scaling_and_sum_semantics_matter(generated):
    """The EP term counts scaled by 1/ep_size (visible at W = 4), and the LoRA gradients are summed,
    not averaged (what the core dp_grad_allreduce does)."""
    clip = _module(generated, EP_CLIP)
    inputs = [clip.make_inputs(r, 4, seed=3, device="cpu", size="smoke") for r in range(4)]
    unscaled = [(*inp[:4], 1, *inp[5:]) for inp in inputs]
    assert not torch.allclose(clip.oracle(inputs, 4)[0][0], clip.oracle(unscaled, 4)[0][0], rtol=1e-3)
    lora = _module(generated, "l2-pkb_moe_epgroupgemm_lora_backward-bf16")
    inputs = [lora.make_inputs(r, 2, seed=3, device="cpu", size="smoke") for r in range(2)]
    summed = lora.oracle(inputs, 2)[0][0]
    assert torch.allclose(summed, inputs[0][0].double() + inputs[1][0].double())


@pytest.mark.parametrize(
    "task_id, old, new",
    [
        ("l3-pkb_zero2_optimizer_shard_grad-bf16", "g.div_(world)", "g.div_(1)"),
        (  # the norm right, the clipping left out
            "l2-pkb_clip_grad_norm_no_ep-bf16",
            "return total, [t * coef.to(t.device) for t in grad_tensors]",
            "return total, [t.clone() for t in grad_tensors]",
        ),
        (
            "l2-pkb_tp_muon_orthogonalization-quintic_cols-bf16",
            "dist.all_reduce(sq, op=dist.ReduceOp.SUM, group=group)",
            "dist.barrier(group=group)",
        ),
    ],
)
def test_a_reference_missing_a_step_is_rejected(generated, tmp_path, task_id, old, new):
    out, _ = generated
    rec = eval_mutant(out, task_id, old, new, tmp_path)
    assert rec["status"] == "incorrect" and "wrong output" in rec["reason"], rec["reason"]
