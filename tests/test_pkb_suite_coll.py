"""Suite pkb, coll group: the PKB-faithful level-1 collective families (ParallelKernelBench rows 1-8, 27,
33-35). Each claims exactly its row in suite pkb, generates, passes CPU validation at world size 2 (one rank
pool, one dtype per family), rejects degenerate candidates, hands the solution the peer's kinds of
arguments (2-D tensors, a stacked (W, m, n) tensor only at the scatter root, Python ints for roots and dims,
Python lists for splits, None for the group), and rejects a reference that gets the collective wrong."""

from __future__ import annotations

import pytest
import torch
from family_checks import FamilySet, assert_all_pass, assert_degenerate_rejected, eval_mutant, validate_records

from mgbench.generator import generate

ROWS = {
    "pkb_allreduce": 1,
    "pkb_allgather": 2,
    "pkb_broadcast": 3,
    "pkb_reduce": 4,
    "pkb_scatter": 5,
    "pkb_gather": 6,
    "pkb_reducescatter": 7,
    "pkb_alltoall": 8,
    "pkb_moe_all2all_primitive": 27,
    "pkb_ulysses_all_to_all_tensor_primitive": 33,
    "pkb_ulysses_all_gather_into_tensor_primitive": 34,
    "pkb_ulysses_all_gather_variable_primitive": 35,
}
FAMILIES = sorted(ROWS)


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """The 12 families in float32 (14 tasks with the variants), validated at 2 ranks in one pool."""
    out = tmp_path_factory.mktemp("pkb_coll")
    records, skips = generate(out, families=FAMILIES, dtypes=["float32"], suites=("pkb",))
    return FamilySet(out, records, skips, validate_records(out, records, 2))


def _module(suite, task_id):
    return suite.module(task_id)


def test_every_task_passes_at_two_ranks_and_rejects_degenerate_candidates(suite):
    assert not suite.skips
    assert {r.spec["family"] for r in suite.records} == set(FAMILIES)
    assert_all_pass(suite.records, suite.results, min_tasks=14)
    assert_degenerate_rejected(suite.results)


def _inputs(suite, task_id, world, seed=0):
    mod = _module(suite, task_id)
    return mod, [mod.make_inputs(r, world, seed=seed, device="cpu", size="smoke") for r in range(world)]


def test_inputs_have_the_peer_builders_kinds(suite):
    m, n = 16, 24
    _, ins = _inputs(suite, "l1-pkb_allgather-fp32", 4)
    assert all(len(x) == 1 and x[0].shape == (m, n) for x in ins)
    _, ins = _inputs(suite, "l1-pkb_reducescatter-fp32", 4)
    assert all(x[0].shape == (4 * m, n) for x in ins)
    _, ins = _inputs(suite, "l1-pkb_alltoall-fp32", 4)
    assert all(x[0].shape == (4, m, n) for x in ins)
    _, ins = _inputs(suite, "l1-pkb_ulysses_all_gather_into_tensor_primitive-fp32", 2)
    assert all(x[1] is None for x in ins)
    _, ins = _inputs(suite, "l1-pkb_ulysses_all_to_all_tensor_primitive-s0_g1-fp32", 2)
    assert all(x[1:] == (0, 1, None) for x in ins)
    _, ins = _inputs(suite, "l1-pkb_ulysses_all_gather_variable_primitive-dim0-fp32", 2)
    assert all(x[0].shape == (m, n) and x[1:] == (0, None) for x in ins)  # even shards, as the peer's
    _, ins = _inputs(suite, "l1-pkb_moe_all2all_primitive-fp32", 4)
    for x, splits_in, splits_out, group in ins:
        assert type(splits_in) is list and type(splits_out) is list and group is None
        assert splits_in == splits_out == [m // 4] * 4 and sum(splits_in) == x.shape[0]


@pytest.mark.parametrize("op", ["broadcast", "reduce", "scatter", "gather"])
def test_the_root_is_a_python_int_drawn_per_seed(suite, op):
    roots = set()
    for seed in range(12):
        _, ins = _inputs(suite, f"l1-pkb_{op}-fp32", 4, seed)
        root = ins[0][1]
        assert type(root) is int and all(x[1] == root for x in ins)
        roots.add(root)
        if op == "scatter":  # only the source holds the stacked tensor; the others an (m, n) receive buffer
            assert [tuple(x[0].shape) for x in ins] == [(4, 16, 24) if r == root else (16, 24) for r in range(4)]
    assert len(roots) > 1


def test_reduce_off_the_root_returns_the_own_tensor(suite):
    mod, ins = _inputs(suite, "l1-pkb_reduce-fp32", 4, seed=5)
    expected = mod.oracle(ins, 4)
    root = ins[0][1]
    for r in range(4):
        want = sum(x[0].double() for x in ins) if r == root else ins[r][0].double()
        assert torch.allclose(expected[r], want)


def _seed_with_root(suite, task_id, root):
    mod = _module(suite, task_id)
    return next(s for s in range(100) if mod.make_inputs(0, 2, seed=s, device="cpu", size="smoke")[1] == root)


MUTANTS = {
    "broadcast_from_rank0": ("l1-pkb_broadcast-fp32", "dist.broadcast(out, src=src)", "dist.broadcast(out, src=0)"),
    "gather_reversed": ("l1-pkb_gather-fp32", "torch.stack(bufs, dim=0)", "torch.stack(bufs[::-1], dim=0)"),
    "reducescatter_max": ("l1-pkb_reducescatter-fp32", "op=dist.ReduceOp.SUM", "op=dist.ReduceOp.MAX"),
    "a2a_gathers_scatter_dim": (
        "l1-pkb_ulysses_all_to_all_tensor_primitive-s0_g1-fp32",
        "torch.cat(recv, dim=gather_dim)",
        "torch.cat(recv, dim=scatter_dim)",
    ),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_wrong_reference_is_rejected(suite, tmp_path, name):
    task_id, old, new = MUTANTS[name]
    seed = _seed_with_root(suite, task_id, 1) if name == "broadcast_from_rank0" else None
    rec = eval_mutant(suite.out, task_id, old, new, tmp_path, seed=seed)
    assert rec["status"] == "incorrect", (name, rec["status"], rec["reason"])
