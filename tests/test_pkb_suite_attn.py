"""Suite pkb, group attn: the PKB-faithful families of ParallelKernelBench rows 39, 48, 55, 56, 57, 59, 62
(taxonomy/families/pkb_attn.yaml). Each is rendered only with --suite pkb, claims exactly its row, is
offered at world size 2 as the peer runs it, passes CPU validation there (one task per family, one rank
pool) with degenerate candidates rejected, passes the peer's scalar and None arguments at its positions,
and a reference missing a step is caught by the oracle."""

from __future__ import annotations

import pytest
import torch
from family_checks import assert_all_pass, assert_degenerate_rejected, eval_mutant, validate_records

from mgbench.generator import generate
from mgbench.generator.generate import GenerateError

ROWS = {
    "pkb_ring_attention_backward_dp": 57,
    "pkb_ring_attention_pp": 56,
    "pkb_ring_attention_tp": 55,
    "pkb_ulysses_attention_e2e": 39,
    "pkb_fsdp_and_tp": 48,
    "pkb_physicsnemo_distributed_rfft": 59,
    "pkb_torchharmonics_spherical_convolution": 62,
}
# one task per family: the variant the peer's builder passes (causal for 55/56, full for 39/57) in bf16,
# the rfft and the spherical convolution in float32 (their only dtype)
CHOSEN = {
    "l3-pkb_ring_attention_backward_dp-full-bf16",
    "l3-pkb_ring_attention_pp-causal-bf16",
    "l3-pkb_ring_attention_tp-causal-bf16",
    "l3-pkb_ulysses_attention_e2e-full-bf16",
    "l3-pkb_fsdp_and_tp-bf16",
    "l2-pkb_physicsnemo_distributed_rfft-fp32",
    "l3-pkb_torchharmonics_spherical_convolution-g2-fp32",
}


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    out = tmp_path_factory.mktemp("pkb_attn")
    records, skips = generate(out, families=list(ROWS), dtypes=["bfloat16", "float32"], suites=["pkb"])
    chosen = [r for r in records if r.task_id in CHOSEN]
    return out, records, skips, chosen, validate_records(out, chosen, 2)


def test_the_core_suite_refuses_a_pkb_family(tmp_path):
    with pytest.raises(GenerateError, match="pkb"):
        generate(tmp_path, families=["pkb_fsdp_and_tp"], dtypes=["float32"])


def test_every_task_is_offered_at_2_4_8_and_passes_at_world_size_2(suite):
    out, records, skips, chosen, results = suite
    assert not skips
    assert all(r.spec["world_sizes"] == [2, 4, 8] and r.spec["suite"] == "pkb" for r in records)
    assert {r.task_id for r in chosen} == CHOSEN
    assert_all_pass(chosen, results, len(CHOSEN))
    assert_degenerate_rejected(results)


def _module(suite, task_id):
    from mgbench.validation.contract import load_module

    return load_module(suite[0] / "tasks" / f"{task_id}.py")


def test_scalar_and_none_arguments_sit_at_the_peer_positions(suite):
    """The peer's non-tensor arguments, as Python values (the groups are built by the solutions)."""
    kinds = {
        "l3-pkb_ring_attention_backward_dp-full-bf16": {6: float, 7: bool},
        "l3-pkb_ring_attention_pp-causal-bf16": {3: int, 4: float, 5: bool},
        "l3-pkb_ring_attention_tp-causal-bf16": {3: int, 4: float, 5: bool},
        "l3-pkb_ulysses_attention_e2e-full-bf16": {3: type(None), 4: int, 5: bool},
        "l3-pkb_fsdp_and_tp-bf16": {4: int, 5: int},
        "l2-pkb_physicsnemo_distributed_rfft-fp32": {1: tuple, 2: tuple, 3: str, 4: type(None)},
        "l3-pkb_torchharmonics_spherical_convolution-g2-fp32": {3: int, 4: int, 5: int, 6: type(None), 7: type(None)},
    }
    for task_id, at in kinds.items():
        inputs = _module(suite, task_id).make_inputs(1, 2, seed=5, device="cpu", size="smoke")
        for pos, typ in at.items():
            assert type(inputs[pos]) is typ, (task_id, pos, inputs[pos])
    fsdp = _module(suite, "l3-pkb_fsdp_and_tp-bf16")
    assert [fsdp.make_inputs(0, w, seed=1, device="cpu", size="smoke")[4:] for w in (2, 4, 8)] == [
        (1, 2),
        (2, 2),
        (2, 4),
    ]
    rfft = _module(suite, "l2-pkb_physicsnemo_distributed_rfft-fp32")
    assert rfft.make_inputs(0, 2, seed=1, device="cpu", size="smoke")[0].dim() == 3
    conv = _module(suite, "l3-pkb_torchharmonics_spherical_convolution-g2-fp32")
    x, psi, weight, groups, *_ = conv.make_inputs(0, 4, seed=1, device="cpu", size="smoke")
    # psi: the peer's coalesced sparse COO basis rows, ENTRIES_PER_ROW per (kernel function, output latitude)
    assert psi.layout == torch.sparse_coo and psi.is_coalesced()  # the peer's kind
    assert psi.shape == (3, 8, 4 * 16) and int((psi.to_dense() != 0).sum()) == 3 * 8 * conv.ENTRIES_PER_ROW
    assert groups == 2 and weight.shape == (4, 2, 3)


MUTANTS = {
    # the data-parallel mean left as a sum over the two replicas
    "dp_sum_not_mean": ("l3-pkb_ring_attention_backward_dp-full-bf16", "            g.div_(dp)\n", ""),
    # stage 1 receives stage 0's output but attends over its own (unused) hidden states
    "pp_stage_input_ignored": (
        "l3-pkb_ring_attention_pp-causal-bf16",
        "        x = torch.empty_like(hidden_states)\n"
        "        for r in dist.batch_isend_irecv([dist.P2POp(dist.irecv, x,",
        "        x = hidden_states\n        for r in dist.batch_isend_irecv([dist.P2POp(dist.irecv, x.clone(),",
    ),
    # the row-parallel output projection not summed over the tensor ranks
    "tp_no_all_reduce": ("l3-pkb_ring_attention_tp-causal-bf16", "    if tp > 1:\n", "    if False:\n"),
    # the gate's SiLU left out
    "fsdp_no_silu": (
        "l3-pkb_fsdp_and_tp-bf16",
        "torch.nn.functional.silu(x_local @ w1)",
        "(x_local @ w1)",
    ),
    # the bias left out
    "conv_no_bias": (
        "l3-pkb_torchharmonics_spherical_convolution-g2-fp32",
        "    if bias is not None:\n",
        "    if False:\n",
    ),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_wrong_references_are_rejected(suite, tmp_path, name):
    rec = eval_mutant(suite[0], *MUTANTS[name], tmp_path)
    assert rec["status"] == "incorrect" and "wrong output" in rec["reason"], (name, rec["reason"])
