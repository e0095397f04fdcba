"""Suites: the core task set is what `generate` renders by default; a peer suite (`suite: pkb` on a family or
variant) adds families that reproduce a peer's problems in its own form only when asked, without moving a core
task, and the loader holds every suite entry to a known peer and a claim of that peer's problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from taxonomy_copy import copy_taxonomy, load_error

from mgbench.generator import generate
from mgbench.generator.generate import GenerateError
from mgbench.taxonomy import load_taxonomy

# a peer-suite variant added to the all_reduce family of a copied taxonomy
PKB_VARIANT = "variants: [{id: sum, op: sum, peers: {pkb: [1]}}, {id: pkb_sum, op: sum, suite: pkb, peers: {pkb: [1]}}"


def _with_pkb_variant(tmp_path: Path) -> Path:
    root = copy_taxonomy(tmp_path, ("collectives.yaml",))
    path = root / "families" / "collectives.yaml"
    text = path.read_text()
    old = "variants: [{id: sum, op: sum, peers: {pkb: [1]}}"
    assert old in text
    path.write_text(text.replace(old, PKB_VARIANT, 1))
    return root


def _manifest(out: Path) -> dict[str, dict]:
    return {d["task_id"]: d for d in map(json.loads, (out / "manifest.jsonl").read_text().splitlines())}


def test_a_peer_suite_is_rendered_only_when_asked_and_core_tasks_do_not_move(tmp_path):
    tax = _with_pkb_variant(tmp_path)
    core = tmp_path / "core"
    generate(core, families=["all_reduce"], dtypes=["fp32"], taxonomy_dir=tax, check_import=False)
    assert not [t for t in _manifest(core) if "pkb_sum" in t]
    both = tmp_path / "both"
    generate(
        both, families=["all_reduce"], dtypes=["fp32"], taxonomy_dir=tax, check_import=False, suites=("core", "pkb")
    )
    m = _manifest(both)
    pkb = sorted(t for t in m if "-pkb_sum-" in t)
    assert pkb and all(m[t]["suite"] == "pkb" for t in pkb)
    for tid, rec in _manifest(core).items():  # the core tasks are byte-identical with or without the suite
        assert rec["suite"] == "core" and m[tid]["content_hash"] == rec["content_hash"]
    only = tmp_path / "only"
    generate(only, families=["all_reduce"], dtypes=["fp32"], taxonomy_dir=tax, check_import=False, suites=("pkb",))
    assert sorted(_manifest(only)) == pkb


def test_a_default_run_keeps_the_peer_suite_tasks_already_there(tmp_path):
    tax = _with_pkb_variant(tmp_path)
    out = tmp_path / "out"
    generate(out, families=["all_reduce"], dtypes=["fp32"], taxonomy_dir=tax, check_import=False, suites=("pkb",))
    generate(out, families=["all_reduce"], dtypes=["fp32"], taxonomy_dir=tax, check_import=False)
    m = _manifest(out)
    assert [t for t in m if "-pkb_sum-" in t] and [t for t in m if "-sum-" in t]  # a core run keeps the pkb set


def test_naming_a_family_outside_the_selected_suites_is_one_clear_error(tmp_path):
    root = copy_taxonomy(tmp_path, ("collectives.yaml",))
    path = root / "families" / "collectives.yaml"
    path.write_text(path.read_text().replace("  - id: broadcast\n", "  - id: broadcast\n    suite: pkb\n", 1))
    assert load_taxonomy(root).families["broadcast"].suite == "pkb"
    with pytest.raises(GenerateError, match=r"family 'broadcast' is in suite 'pkb'.*--suite pkb"):
        generate(tmp_path / "out", families=["broadcast"], taxonomy_dir=root, check_import=False)
    with pytest.raises(GenerateError, match=r"unknown suite 'pkbx' \(known: core, pkb\)"):
        generate(tmp_path / "out", families=["all_reduce"], taxonomy_dir=root, check_import=False, suites=["pkbx"])


@pytest.mark.parametrize(
    "old, new, reason",
    [
        ("  - id: all_reduce\n", "  - id: all_reduce\n    suite: nccl_tests\n", "unknown suite 'nccl_tests'"),
        ("  - id: all_reduce\n", "  - id: all_reduce\n    suite: 7\n", "'suite' must be str"),
        ("{id: sum, op: sum, peers: {pkb: [1]}}", "{id: sum, op: sum, suite: pkb}", "claim one with `peers: {pkb"),
    ],
)
def test_the_loader_rejects_a_bad_suite_in_one_line(tmp_path, old, new, reason):
    root = copy_taxonomy(tmp_path, ("collectives.yaml",))
    assert reason in load_error(root, "families/collectives.yaml", old, new)


def test_the_pkb_suite_reproduces_each_row_once_at_the_peers_world_sizes():
    """Every pkb-suite family claims exactly one ParallelKernelBench row, no row has two of them, and each is
    offered at 2, 4 and 8 ranks, where the peer runs every problem."""
    tax = load_taxonomy()
    pkb = [f for f in tax.families.values() if f.suite == "pkb"]
    rows = [n for f in pkb for n in f.peers.get("pkb", [])]
    assert pkb and all(len(f.peers.get("pkb", [])) == 1 for f in pkb), [f.id for f in pkb]
    assert len(rows) == len(set(rows)), sorted(rows)
    assert [f.id for f in pkb if f.world_sizes != [2, 4, 8]] == []
