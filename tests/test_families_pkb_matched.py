"""Families and variants that match ParallelKernelBench problems in full (PKB rows 9-45 of
taxonomy/peers/pkb.yaml claimed here): they claim exactly their rows, generate, pass CPU
validation (world size 2 in one rank pool; the EP x EP-FSDP clip needs 4), reject degenerate
candidates, draw genuinely uneven splits, and reject the outputs PKB's references get wrong."""

from __future__ import annotations

import pytest
import torch
from family_checks import assert_all_pass, assert_degenerate_rejected
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.generator import generate
from mgbench.generator.spec import world_size_problem
from mgbench.store import load_manifest
from mgbench.taxonomy import load_taxonomy
from mgbench.taxonomy.peer_coverage import peer_rows
from mgbench.validation.contract import load_module
from mgbench.validation.run import validate

CLAIMS = {
    9: "dp_norm_wgrad/layer",
    10: "rw_embedding_a2a",
    11: "ag_gemm/gather_k_t",
    12: "ag_gemm/gather_k",
    14: "gemm_ag",
    15: "ag_mlp_rs",
    17: "sp_rope_qk_gather",
    20: "dequant_all_to_all/fp8",
    22: "ep_grad_clip/l2",
    23: "dp_token_loss/given_count",
    25: "dp_is_pg_loss",
    35: "all_gather_v",
    38: "ulysses_a2a/qkv_seq_to_heads",
    39: "ulysses_attention/fused_kv",
    44: "quant_sim_allreduce",
    45: "sp_rs_rmsnorm/rms",
}
NEW_FAMILIES = [
    "dp_norm_wgrad",
    "rw_embedding_a2a",
    "gemm_ag",
    "ag_mlp_rs",
    "sp_rope_qk_gather",
    "dequant_all_to_all",
    "dp_token_loss",
    "dp_is_pg_loss",
    "all_gather_v",
    "quant_sim_allreduce",
    "sp_rs_rmsnorm",
    "ep_grad_clip",
]
# new variants of families whose other variants other suites validate
NEW_VARIANTS = {
    "ag_gemm": ("gather_k_t", "gather_k"),
    "ulysses_a2a": ("qkv_seq_to_heads",),
    "ulysses_attention": ("fused_kv", "fused_kv_causal"),
}
FLOAT32_ONLY = {"dequant_all_to_all", "dp_is_pg_loss"}
DTYPES = ("bfloat16", "float32")  # production dtype + the float32 one; dequant_all_to_all is float32 only


@pytest.fixture(scope="module")
def tax():
    return load_taxonomy()


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("pkb_matched")
    generate(out, families=NEW_FAMILIES + list(NEW_VARIANTS), dtypes=DTYPES)
    recs = [
        r
        for r in load_manifest(out)
        if r["family"] in NEW_FAMILIES or r["variant"] in NEW_VARIANTS.get(r["family"], ())
    ]
    return out, recs


@pytest.fixture(scope="module")
def validated(generated):
    out, recs = generated
    # one dtype per task family (bf16, or float32 where that is the only one) and the bw scale
    # only (the lat/bw scales share the smoke size), to keep CI short
    ids = [
        r["task_id"]
        for r in recs
        if "-lat-" not in r["task_id"] and (r["dtype"] == "bfloat16" or r["family"] in FLOAT32_ONLY)
    ]
    at2 = [t for t in ids if 2 in next(r for r in recs if r["task_id"] == t)["world_sizes"]]
    at4 = [t for t in ids if t not in at2]
    res = validate(out, out / "r2.jsonl", world_sizes=[2], task_ids=at2, quiet=True)
    res += validate(out, out / "r4.jsonl", world_sizes=[4], task_ids=at4, quiet=True)
    return recs, res, at2 + at4


def test_each_row_is_claimed_by_its_family_or_variant_only(tax):
    def core(claimants: list[str]) -> list[str]:  # the pkb suite's own families also claim these rows
        return [c for c in claimants if tax.families[c.split("/")[0]].suite == "core"]

    rows = {row.n: core(row.matched_by) for row in peer_rows(tax, "pkb")}
    for n, claim in CLAIMS.items():
        assert rows[n] == [claim], (n, rows[n])


def test_every_task_passes_and_rejects_degenerate_candidates(validated):
    recs, results, ids = validated
    assert {r.task_id for r in results} == set(ids)
    assert_all_pass([r for r in recs if r["task_id"] in ids], results, 20)
    assert_degenerate_rejected(results)


def test_the_ep_clip_mesh_needs_four_ranks(tax):
    fam = tax.families["ep_grad_clip"]
    assert "mesh axis expert would have size 1" in world_size_problem(fam, tax, 2, fam.sizes)
    assert world_size_problem(fam, tax, 4, fam.sizes) is None


def _module(generated, task_id):
    out, recs = generated
    return load_module(out / next(r["module"] for r in recs if r["task_id"] == task_id))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), ws=st.integers(2, 8))
def test_variable_gather_and_token_counts_are_uneven(generated, seed, ws):
    gather = _module(generated, "l1-all_gather_v-bf16")
    lengths = [gather.make_inputs(r, ws, seed=seed, device="cpu", size="smoke")[0].shape[0] for r in range(ws)]
    assert len(set(lengths)) > 1
    loss = _module(generated, "l2-dp_token_loss-reduced_count-fp32")
    counts = [int(loss.make_inputs(r, ws, seed=seed, device="cpu", size="smoke")[1]) for r in range(ws)]
    assert len(set(counts)) > 1 and min(counts) > 0


def test_embedding_rows_grouped_by_owner_are_rejected(generated):
    """PKB 10 returns the looked-up rows grouped by owner rank; the lookup must return them in the
    ids' order, and the grouped order does not pass for it."""
    mod = _module(generated, "l2-rw_embedding_a2a-fp32")
    inputs = [mod.make_inputs(r, 4, seed=3, device="cpu", size="smoke") for r in range(4)]
    expected = mod.oracle(inputs, 4)
    ids, shard = inputs[0]
    grouped = expected[0][torch.argsort(ids // shard.shape[0], stable=True)]
    assert not torch.allclose(grouped, expected[0])


def test_fused_kv_attention_attends_over_positions_not_heads(generated):
    """PKB 39's local attention mixes heads at each position; the oracle (and so the validated
    reference) attends over positions: the head-mixing output differs from it."""
    mod = _module(generated, "l3-ulysses_attention-fused_kv-fp32")
    inputs = [mod.make_inputs(r, 2, seed=1, device="cpu", size="smoke") for r in range(2)]
    x = torch.cat([inp[0].double() for inp in inputs], dim=1)
    w_qkv, w_o = inputs[0][1].double(), inputs[0][2].double()
    b, s, hid = x.shape
    qkv = (x @ w_qkv.reshape(hid, -1)).reshape(b, s, *w_qkv.shape[1:])
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    across_heads = torch.softmax(q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5, dim=-1) @ v
    wrong = across_heads.reshape(b, s, -1) @ w_o.reshape(-1, hid)
    expected = torch.cat(mod.oracle(inputs, 2), dim=1)
    assert not torch.allclose(wrong, expected, atol=1e-3)
