"""The trade-off axis of the taxonomy (taxonomy/tradeoffs.yaml): every shipped family carries tags from the
closed vocabulary, the loader rejects an unknown or missing tag with one line naming the family, the tags
reach the task specs without touching the rendered modules, and level-4 tasks get their default."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from taxonomy_copy import copy_taxonomy, load_error

from mgbench.generator.mined import spec_of
from mgbench.generator.render import render_module
from mgbench.generator.spec import expand
from mgbench.taxonomy import TaxonomyError, load_taxonomy
from mgbench.taxonomy.loader import TAXONOMY_DIR, tradeoff_vocabulary

ROOT = Path(__file__).resolve().parents[1]
# The axes: transfer mechanism (copy engine, TMA, multimem), scheduling (intra-, inter-SM),
# collective ordering, data partitioning, overlap of compute and communication.
VOCABULARY = [
    "transfer.copy_engine",
    "transfer.tma",
    "transfer.multimem",
    "schedule.intra_sm",
    "schedule.inter_sm",
    "ordering",
    "partitioning",
    "overlap",
]
GEMM_RS = "    tradeoffs: [overlap, schedule.intra_sm, transfer.tma]\n"  # the line of gemm_rs in fused.yaml


def test_the_vocabulary_is_the_closed_list_with_a_meaning_each():
    vocab = tradeoff_vocabulary()
    assert list(vocab) == VOCABULARY
    assert all(t.meaning and "\n" not in t.meaning and t.name for t in vocab.values())


def test_every_shipped_family_is_tagged_from_the_vocabulary():
    tax = load_taxonomy()
    assert len(tax.families) >= 129
    untagged = [f.id for f in tax.families.values() if not f.tradeoffs]
    assert not untagged, untagged
    for fam in tax.families.values():
        assert set(fam.tradeoffs) <= set(VOCABULARY) and len(set(fam.tradeoffs)) == len(fam.tradeoffs), fam.id
    used = {t for f in tax.families.values() for t in f.tradeoffs}
    assert used == set(VOCABULARY), f"no family exercises {set(VOCABULARY) - used}"


@pytest.mark.parametrize(
    "new, reason",
    [
        ("", "no trade-off tags: add 'tradeoffs: [...]'"),
        ("    tradeoffs: []\n", "no trade-off tags"),
        ("    tradeoffs: [overlap, overlapping]\n", "unknown trade-off 'overlapping'"),
        ("    tradeoffs: overlap\n", "'tradeoffs' must be list, got str"),
        ("    tradeoffs: [overlap, overlap]\n", "a trade-off appears twice"),
    ],
)
def test_loader_rejects_a_missing_or_unknown_tag_naming_the_family(tmp_path, new, reason):
    root = copy_taxonomy(tmp_path, ("fused.yaml",))
    msg = load_error(root, "families/fused.yaml", GEMM_RS, new)
    assert msg.startswith(str(root / "families" / "fused.yaml")) and "entry 'gemm_rs'" in msg and reason in msg, msg
    if "no trade-off" in reason or "unknown" in reason:
        assert "known: transfer.copy_engine, transfer.tma" in msg, msg


def test_a_bad_tag_stops_the_cli_with_one_line_and_exit_2(tmp_path, capsys):
    from mgbench.cli import main

    root = copy_taxonomy(tmp_path, ("fused.yaml",))
    path = root / "families" / "fused.yaml"
    path.write_text(path.read_text().replace(GEMM_RS, "    tradeoffs: [tma]\n", 1))
    assert main(["taxonomy", "--taxonomy", str(root)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "entry 'gemm_rs'" in err[0] and "unknown trade-off 'tma'" in err[0], err


@pytest.mark.parametrize(
    "old, new, reason",
    [
        ("  - id: overlap\n", "  - id: overlap\n    colour: red\n", "entry 'overlap': unknown key 'colour'"),
        ("  send_recv: [ordering]\n", "", "entry 'by_realization': realization 'send_recv' has no default"),
        ("  halo: [overlap]\n", "  halo: [overlap]\n  ring: [ordering]\n", "unknown realization 'ring'"),
        ("  halo: [overlap]\n", "  halo: [overlaps]\n", "entry 'by_realization.halo': unknown trade-off 'overlaps'"),
    ],
)
def test_a_malformed_vocabulary_is_one_line(tmp_path, old, new, reason):
    root = copy_taxonomy(tmp_path, ("collectives.yaml",))
    msg = load_error(root, "tradeoffs.yaml", old, new)
    assert "tradeoffs.yaml" in msg and reason in msg, msg


def test_a_missing_vocabulary_file_is_one_line(tmp_path):
    root = copy_taxonomy(tmp_path, ("collectives.yaml",))
    (root / "tradeoffs.yaml").unlink()
    with pytest.raises(TaxonomyError, match=r"tradeoffs.yaml: missing \(the trade-off vocabulary"):
        load_taxonomy(root)


def test_specs_carry_the_family_tags_and_the_module_never_renders_them():
    tax = load_taxonomy()
    specs, _ = expand(tax, families=["gemm_rs", "all_to_all_v"], dtypes=["bfloat16"])
    assert specs and all(s.tradeoffs == tax.families[s.family].tradeoffs for s in specs)
    for spec in specs:
        assert spec.to_dict()["tradeoffs"] == spec.tradeoffs
        source = render_module(spec)
        assert render_module(replace(spec, tradeoffs=["ordering"])) == source
        assert not any(t in source for t in spec.tradeoffs if "." in t)


def _mined(families: list[str], realizations: list[str]) -> dict:
    cand = {
        "id": "c0123456789",
        "qualname": "f",
        "provenance": {
            "repo": "o/r",
            "path": "p.py",
            "commit": "0" * 40,
            "license": "mit",
            "url": "u",
            "line_start": 1,
            "line_end": 2,
        },
        "classification": {"families": families, "realizations": [{"id": r} for r in realizations]},
    }
    res = {"world_sizes": [2], "spec": {"args": [], "n_full": 1024}}
    return spec_of(cand, res, "l4_x", load_taxonomy())


def test_level4_tasks_take_the_matched_family_else_the_realization_defaults():
    tax = load_taxonomy()
    assert _mined(["gemm_rs"], ["reduce_scatter"])["tradeoffs"] == tax.families["gemm_rs"].tradeoffs
    assert _mined(["not_a_family", "ag_gemm"], [])["tradeoffs"] == tax.families["ag_gemm"].tradeoffs
    assert _mined([], ["all_to_all_v", "send_recv", "all_reduce"])["tradeoffs"] == [
        "transfer.multimem",
        "ordering",
        "partitioning",
    ]
    assert _mined([], [])["tradeoffs"] == []


def test_docs_vocabulary_table_lists_the_vocabulary():
    text = (ROOT / "docs" / "taxonomy.md").read_text()
    section = text.split("\n## Trade-offs\n", 1)[1].split("\n## ", 1)[0]
    ids = re.findall(r"^\| `([a-z_.]+)` \|", section, re.MULTILINE)
    assert ids == VOCABULARY
    assert (TAXONOMY_DIR / "tradeoffs.yaml").is_file()
