"""Families that need four ranks to show their structure, validated at world size 4 in one rank pool:
context-parallel attention on a second mesh axis (taxonomy/families/cp_attention.yaml), Kimi delta
attention over CP x TP, and the SigLIP loss, whose bidirectional ring forwards blocks from W = 4 on.
Degenerate candidates are rejected, the float32 references agree with the oracles to float32
precision, and the ring backward's saved forward results are the global attention's."""

from __future__ import annotations

import pytest
import torch
from family_checks import assert_all_pass, assert_degenerate_rejected, validate_records

from mgbench.generator import generate
from mgbench.validation.contract import load_module

MESH_FAMILIES = ["pp_cp_self_attention", "cp_ring_attention_backward", "kda_cp_tp"]
FAMILIES = MESH_FAMILIES + ["siglip_loss"]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("cp_attention")
    records, skips = generate(out, families=FAMILIES, dtypes=["bfloat16", "float32"])
    return out, records, skips


@pytest.fixture(scope="module")
def validated(generated):
    out, records, _ = generated
    chosen = [r for r in records if r.spec["dtype"] == "float32"]
    return chosen, validate_records(out, chosen, world_size=4)


def test_meshes_are_two_dimensional_and_need_four_ranks(generated):
    _, records, skips = generated
    assert not skips and {r.spec["family"] for r in records} == set(FAMILIES)
    for r in (r for r in records if r.spec["family"] in MESH_FAMILIES):
        assert r.spec["world_sizes"] == [4, 8] and len(r.spec["mesh_layout"]) == 2


def test_every_task_passes_at_world_size_4(validated):
    assert_all_pass(*validated, 5)


def test_float32_references_agree_with_the_oracle_to_float32_precision(validated):
    """A block scored twice or a gradient accumulator sent the wrong way is a few percent of the
    output's rms, which calibration would absorb; the float32 references must be within 1e-5."""
    assert all(r.max_error <= 1e-5 for r in validated[1]), [(r.task_id, r.max_error) for r in validated[1]]


def test_degenerate_candidates_are_rejected(validated):
    assert_degenerate_rejected(validated[1])


@pytest.mark.parametrize("variant, causal", [("causal", True), ("full", False)])
def test_ring_backward_inputs_carry_the_global_forward(generated, variant, causal):
    """out and lse handed to each rank are the attention of its queries over the replica's whole
    sequence (causal or not), not of its own chunk: what the ring forward saves."""
    out, records, _ = generated
    rec = next(r for r in records if r.task_id == f"l3-cp_ring_attention_backward-{variant}-fp32")
    mod = load_module(out / rec.module)
    world = 4
    ins = [mod.make_inputs(r, world, seed=3, device="cpu", size="smoke") for r in range(world)]
    for replica in range(2):
        ranks = [mod._rank_at({"data": replica, "context_ring": j}, world) for j in range(2)]
        q, k, v = (torch.cat([ins[r][n].double() for r in ranks], 1).transpose(1, 2) for n in (1, 2, 3))
        s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
        if causal:
            s = s.masked_fill(torch.ones(s.shape[-1], s.shape[-1], dtype=torch.bool).triu(1), float("-inf"))
        lse = torch.logsumexp(s, -1)
        o = (torch.softmax(s, -1) @ v).transpose(1, 2)
        for j, r in enumerate(ranks):
            assert torch.allclose(ins[r][5].double(), lse.chunk(2, -1)[j], atol=1e-4)
            assert torch.allclose(ins[r][4].double(), o.chunk(2, 1)[j], atol=1e-4)
