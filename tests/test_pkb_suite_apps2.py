"""The PKB-faithful application families of group apps2 (suite pkb, rows 78 and 61 of
taxonomy/peers/pkb.yaml): each claims exactly its row, generates only under --suite pkb, passes CPU
validation at world size 2 (one dtype per variant, one rank pool), rejects degenerate candidates,
takes the peer's argument kinds (Python ints, floats, bools, a string, None at the peer's
positions), and rejects a reference missing a step or reintroducing the peer's id offset bug."""

from __future__ import annotations

import pytest
import torch
from family_checks import FamilySet, assert_all_pass, assert_degenerate_rejected, eval_mutant, validate_records

from mgbench.generator import generate

ROWS = {"pkb_magi1_tile_parallel_vae_decode": 78, "pkb_gsplat_3d_gaussian_splatting": 61}
# (task, text of the reference, replacement)
MUTANTS = {
    "no_horizontal_blend": (
        "l3-pkb_magi1_tile_parallel_vae_decode-bf16",
        "tile = _fade_into(decoded[i - 1], tile, fades[2], 4)",
        "pass",
    ),
    "peer_destination_offset": (  # the peer's bug: the destination rank's offset, not the source's
        "l3-pkb_gsplat_3d_gaussian_splatting-bf16",
        "gids + first]",
        "gids + (cam_ids // c) * int(n_all[0])]",
    ),
}


@pytest.fixture(scope="module")
def apps2(tmp_path_factory) -> FamilySet:
    out = tmp_path_factory.mktemp("pkb_apps2")
    records, skips = generate(out, families=list(ROWS), dtypes=["bfloat16"], suites=("pkb",))
    return FamilySet(out, records, skips, validate_records(out, records, 2))


def test_every_task_passes_and_rejects_degenerate_outputs(apps2):
    assert not apps2.skips
    assert {r.spec["family"] for r in apps2.records} == set(ROWS)
    assert_all_pass(apps2.records, apps2.results, min_tasks=3)
    assert_degenerate_rejected(apps2.results)


def test_scalar_arguments_sit_at_the_peers_positions(apps2):
    def inputs(task, rank=0, ws=2):
        return apps2.module(task).make_inputs(rank, ws, seed=3, device="cpu", size="smoke")

    vae = inputs("l3-pkb_magi1_tile_parallel_vae_decode-bf16")
    assert vae[0].dtype == torch.bfloat16 and vae[0].dim() == 5
    assert all(isinstance(v, int) for v in vae[1:4] + vae[6:9])
    assert isinstance(vae[4], float) and isinstance(vae[5], float) and vae[9] is False and vae[10] is None
    gs0, gs1 = inputs("l3-pkb_gsplat_3d_gaussian_splatting-bf16"), inputs("l3-pkb_gsplat_3d_gaussian_splatting-bf16", 1)
    assert all(t.dtype == torch.bfloat16 for t in gs0[:7]) and gs0[5].shape == (1, 4, 4) and gs0[6].shape == (1, 3, 3)
    assert gs0[0].shape == gs1[0].shape  # the same Gaussian count on every rank (even)
    assert isinstance(gs0[7], int) and isinstance(gs0[8], int) and all(isinstance(v, float) for v in gs0[9:12])
    assert gs0[12] == "pinhole"


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_wrong_reference_is_rejected(apps2, tmp_path, name):
    rec = eval_mutant(apps2.out, *MUTANTS[name], tmp_path, seed=1234)
    assert rec["status"] == "incorrect", (name, rec["status"], rec["reason"])
