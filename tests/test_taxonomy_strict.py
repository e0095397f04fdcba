"""Taxonomy entries that YAML accepts but mean something else stop with one line: a size written as a
string, a `divisible` key naming a size the family lacks, a stray key in realizations/dims/workloads
(an unquoted comma in a flow mapping)."""

from __future__ import annotations

from pathlib import Path

import pytest
from taxonomy_copy import copy_taxonomy, load_error

from mgbench.taxonomy import load_taxonomy


def _copy(tmp_path: Path) -> Path:
    return copy_taxonomy(tmp_path, ("collectives.yaml",))


AR_SIZES = "sizes: {smoke: {n: 4096}, full: {n: 33554432}}"


@pytest.mark.parametrize(
    "new, reason",
    [
        ('sizes: {smoke: {n: "4096"}, full: {n: 33554432}}', "'sizes.smoke.n' must be int, got str '4096'"),
        ("sizes: {smoke: {n: 4096}, full: {n: 3.5}}", "'sizes.full.n' must be int, got float"),
        (
            'sizes: {smoke: {n: 4096, tile: [2, "8"]}, full: {n: 33554432}}',
            "'sizes.smoke.tile[1]' must be int, got str",
        ),
        ("sizes: {smoke: {n: 4096}, full: {m: 33554432}}", "divisible names size 'n', which sizes.full lacks"),
    ],
)
def test_bad_family_size_is_one_line(tmp_path, new, reason):
    msg = load_error(_copy(tmp_path), "families/collectives.yaml", AR_SIZES, new)
    assert "entry 'all_reduce'" in msg and reason in msg, msg


def test_a_size_may_be_a_shape(tmp_path):
    """A list of ints (a shape, e.g. a tile [t, h, w]) is a valid size."""
    root = _copy(tmp_path)
    path = root / "families" / "collectives.yaml"
    path.write_text(
        path.read_text().replace(AR_SIZES, "sizes: {smoke: {n: 4096, tile: [2, 8]}, full: {n: 33554432}}", 1)
    )
    assert load_taxonomy(root).families["all_reduce"].sizes["smoke"]["tile"] == [2, 8]


@pytest.mark.parametrize(
    "file, old, new, entry",
    [
        (
            "realizations.yaml",
            "{id: halo, name: Halo exchange with neighbours}",
            "{id: halo, name: Halo exchange (left, right)}",
            "halo",
        ),
        ("workloads.yaml", "{id: gemm,", "{id: gemm, nmae: x,", "gemm"),
        ("dims.yaml", "  - id: data\n", "  - id: data\n    colour: red\n", "data"),
    ],
)
def test_stray_key_in_a_base_file_is_one_line(tmp_path, file, old, new, entry):
    msg = load_error(_copy(tmp_path), file, old, new)
    assert f"entry '{entry}'" in msg and "unknown key" in msg, msg


def test_shipped_realization_names_are_whole():
    tax = load_taxonomy()
    assert tax.realizations["send_recv"].name == "Point-to-point send/recv (ring shift, stage-to-stage)"
