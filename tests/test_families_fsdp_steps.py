"""Full data-parallel training steps (ddp_train_step, zero_train_step) and fp8 delayed-scaling
FSDP collectives (fp8_delayed_fsdp): every task passes CPU validation at world size 2 (one rank
pool) and rejects degenerate candidates; a step that skips the state broadcast or the gradient
averaging, and a collective that skips the fp8 round trip, are caught by the oracle."""

from __future__ import annotations

import pytest
from family_checks import assert_all_pass, assert_degenerate_rejected, eval_mutant, family_suite

FAMILIES = ["ddp_train_step", "zero_train_step", "fp8_delayed_fsdp"]


steps = family_suite("fsdp_steps", FAMILIES)


def test_every_task_passes_at_world_size_2(steps):
    out, records, skips, results = steps
    assert not skips and {r.spec["family"] for r in records} == set(FAMILIES)
    assert_all_pass(records, results, 7)
    assert_degenerate_rejected(results)


MUTANTS = {
    # rank 1 keeps its stale replica of the parameters and moments
    "no_state_broadcast": (
        "l3-ddp_train_step-fp32",
        "    for flat in flats:\n        dist.broadcast(flat, src=0)\n",
        "",
    ),
    # each rank steps with its own gradient shard of the sum, not divided by W
    "gradient_not_averaged": ("l3-zero_train_step-zero2-fp32", "    g_part /= world\n", ""),
    # the FSDP step without AdamW's decoupled weight decay
    "no_weight_decay": ("l3-zero_train_step-fsdp-fp32", "    if WEIGHT_DECAY:\n", "    if False:\n"),
    # the bf16 gradients reduce-scattered as they are, without the fp8 round trip
    "no_fp8_round_trip": (
        "l2-fp8_delayed_fsdp-rs_qdq-bf16",
        "    return _dequantize(_quantize(x, scale), scale, x.dtype), hist\n",
        "    return x.clone(), hist\n",
    ),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_wrong_steps_are_rejected(steps, tmp_path, name):
    rec = eval_mutant(steps[0], *MUTANTS[name], tmp_path)
    assert rec["status"] == "incorrect" and "wrong output" in rec["reason"], (name, rec["reason"])
