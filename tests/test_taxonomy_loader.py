"""Taxonomy loader: malformed entries give one-line errors naming file, entry and reason;
composition rules (compositions.yaml) decide which plans load and their mesh layout."""

from __future__ import annotations

from pathlib import Path

import pytest
from taxonomy_copy import copy_taxonomy

from mgbench.taxonomy import TaxonomyError, load_taxonomy

FAMILY_FILES = ("collectives.yaml", "plans2d.yaml")  # a stable subset: other families change


def _copy(tmp_path: Path) -> Path:
    """A taxonomy folder with the base files and a stable subset of the family files."""
    return copy_taxonomy(tmp_path, FAMILY_FILES)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new, 1))


def _error(root: Path) -> str:
    with pytest.raises(TaxonomyError) as e:
        load_taxonomy(root)
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


TP_DP = (
    "plan: [{dim: tensor, size: 2}, {dim: data, size: rest}]\n    realization: [all_reduce]\n    "
    "dtypes: [bfloat16, float16, float32]\n    world_sizes: [4, 8]\n    sizes: {smoke: {m: 32"
)


@pytest.mark.parametrize(
    "old, new, entry, reason",
    [
        (TP_DP, TP_DP.replace("dim: tensor", "dim: tensr"), "tp_dp_linear_grad", "unknown dimension 'tensr'"),
        (
            TP_DP,
            TP_DP.replace("{dim: data, size: rest}", "{dim: data, size: -1}"),
            "tp_dp_linear_grad",
            "bad mesh size -1",
        ),
        (
            TP_DP,
            TP_DP.replace("{dim: data, size: rest}", "{dim: data}"),
            "tp_dp_linear_grad",
            "bad mesh constraint: size 'world'",
        ),
        (
            "plan: [{dim: tensor, size: 2}, {dim: pipeline, size: rest}]",
            "plan: [{dim: tensor, size: 2}, {dim: pipeline, size: 1}]",
            "pp_tp_mlp",
            "bad mesh constraint: dim pipeline needs mesh size >= 2",
        ),
        (
            "divisible: {m: data, k: tensor}",
            "divisible: {m: data, k: expert}",
            "tp_dp_linear_grad",
            "bad mesh constraint: divisible.k",
        ),
        (
            "template: plans2d/hsdp_linear.py.j2",
            "template: plans2d/nope.py.j2",
            "hsdp_linear",
            "missing template 'plans2d/nope.py.j2'",
        ),
        ("  - id: tp_dp_embedding\n", "  - id: tp_dp_vocab_ce\n", "tp_dp_vocab_ce", "duplicate"),
        (
            "  - id: usp_attention\n    level: 3\n",
            "  - id: usp_attention\n    level: three\n",
            "usp_attention",
            "'level' must be int",
        ),
        (
            "dtypes: [bfloat16, float16, float32]\n    world_sizes: [4, 8]\n    sizes: {smoke: {s: 32, h: 64}",
            "dtypes: [bfloat16, float16, float32]\n    world_sizes: 8\n    sizes: {smoke: {s: 32, h: 64}",
            "sp_tp_rmsnorm",
            "'world_sizes' must be list",
        ),
        (
            "plan: [{dim: tensor, size: 2}, {dim: sequence, size: rest}]",
            "plan: [{dim: context_ulysses, size: 2}, {dim: sequence, size: rest}]",
            "sp_tp_rmsnorm",
            "forbidden composition context_ulysses x sequence on separate mesh axes: Ulysses already",
        ),
        (
            "plan: [{dim: tensor, size: 2}, {dim: pipeline, size: rest}]",
            "plan: [{dim: tensor}, {dim: pipeline}]",
            "pp_tp_mlp",
            "forbidden composition tensor x pipeline on one shared mesh axis",
        ),
    ],
)
def test_malformed_family_entry(tmp_path, old, new, entry, reason):
    root = _copy(tmp_path)
    _edit(root / "families" / "plans2d.yaml", old, new)
    msg = _error(root)
    assert "plans2d.yaml" in msg and f"entry '{entry}'" in msg and reason in msg, msg


@pytest.mark.parametrize(
    "old, new, entry, reason",
    [
        (
            "{dims: [data, tensor], layout: [data, tensor]",
            "{dims: [data, tensr], layout: [data, tensr]",
            "data/tensr",
            "unknown dimension 'tensr'",
        ),
        (
            "{dims: [data, tensor], layout: [data, tensor]",
            "{dims: [data, tensor], layout: [data, fsdp]",
            "data/tensor",
            "'layout' must list the pair's two dims",
        ),
        (
            '{dims: [data, tensor], layout: [data, tensor], reason: "TP inside a node, data replicas across nodes"}',
            "{dims: [data, tensor]}",
            "data/tensor",
            "needs a 'reason'",
        ),
        (
            "{dims: [data, tensor], layout: [data, tensor]",
            "{dims: [data, tensor], layot: [data, tensor]",
            "data/tensor",
            "unknown key 'layot'",
        ),
        (
            "{dims: [data, expert], layout: [data, expert], share: true",
            "{dims: [data, expert], layout: [data, expert], share: 1",
            "data/expert",
            "'share' must be bool",
        ),
        (
            "{dims: [data, tensor], layout: [data, tensor]",
            "{dims: [data], layout: [data, tensor]",
            "data",
            "'dims' must be a list of two dim ids",
        ),
    ],
)
def test_malformed_composition_entry(tmp_path, old, new, entry, reason):
    root = _copy(tmp_path)
    _edit(root / "compositions.yaml", old, new)
    msg = _error(root)
    assert "compositions.yaml" in msg and f"entry '{entry}'" in msg and reason in msg, msg


def test_duplicate_composition_pair(tmp_path):
    root = _copy(tmp_path)
    _edit(
        root / "compositions.yaml",
        "  - {dims: [fsdp, tensor]",
        "  - {dims: [tensor, data], layout: [data, tensor], reason: again}\n  - {dims: [fsdp, tensor]",
    )
    msg = _error(root)
    assert "compositions.yaml" in msg and "entry 'tensor/data'" in msg and "duplicate pair" in msg, msg


def test_unlisted_pair_is_forbidden(tmp_path):
    root = _copy(tmp_path)
    path = root / "compositions.yaml"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(ln for ln in lines if not ln.startswith("  - {dims: [pipeline, tensor]")) + "\n")
    msg = _error(root)
    assert "plans2d.yaml" in msg and "entry 'pp_tp_mlp'" in msg and "not listed in compositions.yaml" in msg, msg


def test_missing_compositions_file(tmp_path):
    root = _copy(tmp_path)
    (root / "compositions.yaml").unlink()
    assert "compositions.yaml: missing" in _error(root)


def test_bad_dim_mesh_constraint(tmp_path):
    root = _copy(tmp_path)
    _edit(root / "dims.yaml", "mesh: {min_size: 2}", "mesh: {min_size: 2, even: true}")
    msg = _error(root)
    assert "dims.yaml" in msg and "entry 'pipeline'" in msg and "unknown mesh constraint 'even'" in msg, msg


def test_layouts_follow_compositions(tmp_path):
    tax = load_taxonomy(_copy(tmp_path))
    layout = {f.id: [a.dim for a in f.layout] for f in tax.families.values()}
    assert layout["tp_dp_linear_grad"] == ["data", "tensor"]  # plan lists tensor first
    assert layout["pp_cp_attention"] == ["pipeline", "context_ring"]
    assert layout["usp_attention"] == ["context_ring", "context_ulysses"]
    assert layout["all_reduce"] == []  # no plan: no mesh


def test_three_axis_plan_order_and_cycle(tmp_path):
    root = _copy(tmp_path)
    three = "plan: [{dim: tensor, size: 2}, {dim: fsdp, size: 2}, {dim: data, size: rest}]"
    _edit(root / "families" / "plans2d.yaml", "plan: [{dim: tensor, size: 2}, {dim: fsdp, size: rest}]", three)
    tax = load_taxonomy(root)
    assert [a.dim for a in tax.families["fsdp_tp_mlp"].layout] == ["data", "fsdp", "tensor"]
    _edit(root / "compositions.yaml", "layout: [data, fsdp]", "layout: [fsdp, data]")
    _edit(root / "compositions.yaml", "layout: [fsdp, tensor]", "layout: [tensor, fsdp]")
    msg = _error(root)
    assert "entry 'fsdp_tp_mlp'" in msg and "do not agree on one axis order" in msg, msg


@pytest.mark.parametrize(
    "old, new, reason",
    [
        ("peers: {pkb: [48]}", "peers: {pbk: [48]}", "unknown peer 'pbk'"),
        ("peers: {pkb: [48]}", "peers: {pkb: [880]}", "pkb has no problem 880"),
        ("peers: {pkb: [48]}", "peers: {pkb: 48}", "'peers.pkb' must be list"),
        ("peers: {pkb: [48]}", "models: [{project: torchtitan}]", "each of 'models' must be {project: str, file: str}"),
    ],
)
def test_malformed_peer_claim(tmp_path, old, new, reason):
    root = _copy(tmp_path)
    _edit(root / "families" / "plans2d.yaml", old, new)
    msg = _error(root)
    assert "plans2d.yaml" in msg and "fsdp_tp_mlp" in msg and reason in msg, msg


def test_variant_metadata_is_not_a_template_param_and_extends_the_description(tmp_path):
    """A variant's `peers` and `description` are metadata: the claim is reported by the peer table,
    the sentence is appended to the family description of that variant's tasks only, and neither
    reaches the template params (so existing tasks render byte-identically)."""
    from mgbench.generator.spec import expand
    from mgbench.taxonomy.peer_coverage import peer_rows

    root = _copy(tmp_path)
    _edit(
        root / "families" / "plans2d.yaml",
        "  - id: fsdp_tp_mlp\n",
        "  - id: fsdp_tp_mlp\n    variants: "
        "[{id: base}, {id: wide, peers: {pkb: [47]}, description: 'Wider  variant.'}]\n",
    )
    tax = load_taxonomy(root)
    rows = {r.n: r.matched_by for r in peer_rows(tax, "pkb")}
    assert rows[47] == ["fsdp_tp_mlp/wide"] and rows[48] == ["fsdp_tp_mlp"] and rows[62] == []
    specs = {s.variant: s for s in expand(tax, families=["fsdp_tp_mlp"])[0]}
    assert specs["wide"].description == specs["base"].description + " Wider variant."
    assert "peers" not in specs["wide"].params and "description" not in specs["wide"].params


@pytest.mark.parametrize(
    "new, reason",
    [
        ("{n: 19, name: blocked_fp8_quantize, audit: matched}", "audit 'matched' is not one of full, partial, none"),
        ("{n: 19, name: blocked_fp8_quantize, audit: partial}", "audit partial needs `differs`"),
    ],
)
def test_a_peer_audit_verdict_is_checked(tmp_path, new, reason):
    """The audit's verdict per peer problem is data the loader checks: one of full/partial/none, and a
    verdict other than full says what differs."""
    import re

    root = _copy(tmp_path)
    path = root / "peers" / "pkb.yaml"
    path.write_text(re.sub(r"  - \{n: 19, name: blocked_fp8_quantize[^\n]*", "  - " + new, path.read_text()))
    msg = _error(root)
    assert "pkb.yaml" in msg and "problem 19" in msg and reason in msg, msg


def test_the_peer_table_reports_claims_and_the_audit_apart():
    from mgbench.taxonomy.peer_coverage import peer_rows, summary

    tax = load_taxonomy()
    rows = peer_rows(tax, "pkb")
    assert all(r.matched_by for r in rows)  # every problem claimed by some family...
    verdicts = [r.verdict for r in rows]
    assert set(verdicts) <= {"full", "partial", "none"} and len(verdicts) == 87
    assert all(r.differs for r in rows if r.verdict != "full")  # ...and the audit says what differs
    text = summary(rows)
    assert "87 of 87 problems claimed" in text and f"{verdicts.count('full')} full" in text
