"""Two-dimension plan families (taxonomy/families/plans2d.yaml): generation, world-size rules,
skip reports, and CPU validation at world size 4 in one rank pool."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from probe_jobs import MeshGroupsProbe
from taxonomy_copy import copy_taxonomy

from mgbench.generator import generate
from mgbench.generator.skips import format_skips, skip_summary
from mgbench.generator.spec import expand, world_size_problem
from mgbench.store import load_manifest
from mgbench.taxonomy import load_taxonomy
from mgbench.taxonomy.loader import TAXONOMY_DIR
from mgbench.validation.pool import RankPool
from mgbench.validation.run import check_task

PLANS = TAXONOMY_DIR / "families" / "plans2d.yaml"
FAMILIES = [f["id"] for f in yaml.safe_load(PLANS.read_text())["families"]]
DTYPES = ("float32", "bfloat16", "float16")


def _taxonomy(tmp: Path, edit=None) -> Path:
    """A taxonomy folder with the base files and plans2d.yaml only (optionally edited)."""
    root = copy_taxonomy(tmp, ())
    text = PLANS.read_text()
    (root / "families" / "plans2d.yaml").write_text(edit(text) if edit else text)
    return root


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("plans2d")
    out = tmp / "out"
    generate(out, families=FAMILIES, taxonomy_dir=_taxonomy(tmp))
    return out


def test_families_expand_to_2d_meshes(generated):
    recs = load_manifest(generated)
    assert len(FAMILIES) >= 12 and {r["family"] for r in recs} == set(FAMILIES)
    assert len(recs) == 3 * len(FAMILIES) + 3  # 3 dtypes; one family has 2 variants
    for r in recs:
        assert r["level"] == 3 and r["world_sizes"] == [4, 8] and not r["skipped_world_sizes"]
        assert len(r["mesh_layout"]) == 2 and len(set(r["dims"])) == 2
        src = (generated / r["module"]).read_text()
        assert "init_device_mesh" in src and "def oracle" in src and "new_group" not in src


def test_world_size_problems(tmp_path):
    tax = load_taxonomy(_taxonomy(tmp_path))
    fam = tax.families["tp_dp_linear_grad"]  # tensor=2 x data=rest, m: data, k: tensor
    sizes = {"smoke": {"m": 32, "k": 64, "n": 48}, "full": {"m": 96, "k": 64, "n": 48}}
    assert world_size_problem(fam, tax, 4, sizes) is None
    assert "does not divide world size 3" in world_size_problem(fam, tax, 3, sizes)
    assert "mesh axis data would have size 1" in world_size_problem(fam, tax, 2, sizes)
    assert "size smoke.m=32 is not divisible by data=3" in world_size_problem(fam, tax, 6, sizes)
    assert "size smoke.k=63 is not divisible by tensor=2" in world_size_problem(
        fam, tax, 4, {"smoke": {"m": 32, "k": 63}, "full": {"m": 32, "k": 64}}
    )
    mlp = tax.families["fsdp_tp_mlp"]  # f divisible by tensor*fsdp
    ok = {"smoke": {"t": 48, "h": 48, "f": 96}, "full": {"t": 48, "h": 48, "f": 96}}
    assert world_size_problem(mlp, tax, 8, ok) is None
    bad = {"smoke": {"t": 48, "h": 48, "f": 36}, "full": ok["full"]}
    assert "smoke.f=36 is not divisible by tensor*fsdp=8" in world_size_problem(mlp, tax, 8, bad)
    pp = tax.families["pp_tp_mlp"]  # pipeline needs >= 2 stages
    assert "pipeline would have size 1" in world_size_problem(pp, tax, 2, pp.sizes)


def test_all_fixed_plan_must_match_world(tmp_path):
    edit = lambda s: s.replace(
        "plan: [{dim: tensor, size: 2}, {dim: data, size: rest}]\n    realization: [all_reduce]\n"
        "    dtypes: [bfloat16, float16, float32]\n    world_sizes: [4, 8]\n    sizes: {smoke: {m: 32",
        "plan: [{dim: tensor, size: 2}, {dim: data, size: 2}]\n    realization: [all_reduce]\n"
        "    dtypes: [bfloat16, float16, float32]\n    world_sizes: [4, 8]\n    sizes: {smoke: {m: 32",
        1,
    )
    tax = load_taxonomy(_taxonomy(tmp_path, edit))
    fam = tax.families["tp_dp_linear_grad"]
    assert world_size_problem(fam, tax, 4, fam.sizes) is None
    assert world_size_problem(fam, tax, 8, fam.sizes) == "mesh of 4 ranks does not match world size 8"


def test_skips_are_reported_per_family_and_world_size(tmp_path):
    def edit(s: str) -> str:
        s = s.replace("world_sizes: [4, 8]", "world_sizes: [2, 4, 8]", 1)  # tp_dp_linear_grad
        return s.replace(
            "    world_sizes: [4, 8]\n    params: {topk: 2}", "    world_sizes: [2]\n    params: {topk: 2}", 1
        )

    tax = load_taxonomy(_taxonomy(tmp_path, edit))
    specs, skips = expand(tax, families=["tp_dp_linear_grad", "ep_dp_moe"])
    assert {s.task_id for s in skips} == {f"l3-ep_dp_moe-{d}" for d in ("bf16", "fp16", "fp32")}
    assert all(
        s.world_sizes == {2: "mesh axis expert would have size 1 at world size 2 (the 2-D mesh degenerates)"}
        for s in skips
    )
    assert all(s.world_sizes == [4, 8] and 2 in s.skipped_world_sizes for s in specs)
    rows = skip_summary([s.to_dict() for s in specs], skips)
    assert [(fam, ws, n, dropped) for fam, ws, n, dropped, _ in rows] == [
        ("ep_dp_moe", "2", 3, 3),
        ("tp_dp_linear_grad", "2", 3, 0),
    ]
    assert format_skips(rows).splitlines()[0] == (
        "  ep_dp_moe ws=2: 3 tasks (3 dropped): mesh axis expert would have size 1 at world size 2 (the 2-D "
        "mesh degenerates)"
    )


def test_validate_all_plan_families_at_world_size_4(generated):
    """One gloo pool of 4 ranks: one task per family (dtypes rotate) passes every check, zeros and
    another seed's outputs are rejected, and the mesh's groups are created by the first call only."""
    recs = load_manifest(generated)
    picked = []
    for i, fam in enumerate(FAMILIES):
        mine = sorted((r for r in recs if r["family"] == fam), key=lambda r: r["task_id"])
        picked.append(next((r for r in mine if r["dtype"] == DTYPES[i % 3]), mine[0]))
    with RankPool(4, "gloo", pg_timeout_s=120, extra_handlers=["plans2d_jobs"]) as pool:
        oc = pool.run(MeshGroupsProbe(path=picked[0]["_path"]), timeout_s=120)
        assert oc.status == "ok", oc.reason
        assert all(r["result"]["first_call"] >= 2 and r["result"]["later_calls"] == 0 for r in oc.results)
        results = [check_task(pool, t, "smoke", "cpu", 0, 120.0) for t in picked]
    failed = [(r.task_id, r.reason) for r in results if r.status != "passed"]
    assert not failed, failed
    for r in results:
        assert r.checks["rejects_zeros"] and r.checks["rejects_other_seed"] and r.checks["matches_oracle"], r.task_id
