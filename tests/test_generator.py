"""Generator: determinism, ids, hashes, filters, and one-line errors for broken templates/taxonomy."""

from __future__ import annotations

import filecmp
import json
import shutil
from pathlib import Path

import pytest

from mgbench.generator import GenerateError, generate
from mgbench.taxonomy import TaxonomyError, load_taxonomy
from mgbench.taxonomy.loader import TAXONOMY_DIR
from mgbench.templates import TEMPLATES_DIR


def test_generate_is_byte_identical_and_ids_stable(tmp_path, core_tasks):
    again = tmp_path / "again"
    generate(again, families=["all_reduce", "ag_gemm"], check_import=False)
    for name in (again / "tasks").iterdir():
        assert filecmp.cmp(name, core_tasks / "tasks" / name.name, shallow=False), name
    first = [json.loads(x) for x in (core_tasks / "manifest.jsonl").read_text().splitlines()]
    ids = [r["task_id"] for r in first]
    assert ids == sorted(ids) and len(ids) == len(set(ids))
    assert "l1-all_reduce-sum-bw-bf16" in ids and "l2-ag_gemm-fp32" in ids
    third = tmp_path / "third"
    generate(third, families=["all_reduce", "ag_gemm"], check_import=False)
    assert (third / "manifest.jsonl").read_bytes() == (again / "manifest.jsonl").read_bytes()


def test_content_hash_tracks_source(core_tasks):
    import hashlib

    for rec in map(json.loads, (core_tasks / "manifest.jsonl").read_text().splitlines()):
        src = (core_tasks / rec["module"]).read_bytes()
        assert rec["content_hash"] == hashlib.sha256(src).hexdigest()


def test_filters(tmp_path):
    recs, _ = generate(tmp_path, levels=[2], dtypes=["bf16"], check_import=False)
    assert recs and all(r.spec["level"] == 2 and r.spec["dtype"] == "bfloat16" for r in recs)
    with pytest.raises(GenerateError, match="unknown family 'nope'"):
        generate(tmp_path, families=["nope"], check_import=False)


def _copy_tree(tmp_path: Path) -> tuple[Path, Path]:
    tax, tpl = tmp_path / "taxonomy", tmp_path / "templates"
    shutil.copytree(TAXONOMY_DIR, tax, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    shutil.copytree(TEMPLATES_DIR, tpl, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return tax, tpl


def test_template_syntax_error_names_template(tmp_path):
    tax, tpl = _copy_tree(tmp_path)
    path = tpl / "families" / "collectives" / "all_gather.py.j2"
    path.write_text(path.read_text().replace("{% block solution %}", "{% block solution %}{% if %}", 1))
    with pytest.raises(GenerateError) as e:
        generate(tmp_path / "out", families=["all_gather"], taxonomy_dir=tax, templates_dir=tpl, check_import=False)
    msg = str(e.value)
    assert "\n" not in msg and "collectives/all_gather.py.j2" in msg and "line" in msg


def test_rendered_python_syntax_error_names_template(tmp_path):
    tax, tpl = _copy_tree(tmp_path)
    path = tpl / "families" / "collectives" / "ring_shift.py.j2"
    path.write_text(path.read_text().replace("out = torch.empty_like(x)", "out = torch.empty_like(x", 1))
    with pytest.raises(GenerateError) as e:
        generate(tmp_path / "out", families=["ring_shift"], taxonomy_dir=tax, templates_dir=tpl)
    assert "\n" not in str(e.value) and "collectives/ring_shift.py.j2" in str(e.value)


def test_rendered_module_that_fails_import_names_template(tmp_path):
    tax, tpl = _copy_tree(tmp_path)
    base = tpl / "base.py.j2"
    base.write_text(
        base.read_text() + "\n{% if task_id.startswith('l1-ring_shift') %}raise RuntimeError('planted'){% endif %}\n"
    )
    with pytest.raises(GenerateError) as e:
        generate(tmp_path / "out", families=["ring_shift"], taxonomy_dir=tax, templates_dir=tpl)
    assert "\n" not in str(e.value) and "ring_shift.py.j2" in str(e.value) and "planted" in str(e.value)


@pytest.mark.parametrize(
    "edit, expect",
    [
        (
            lambda s: s.replace("dims:", "dims:\n  - id: bogus\n    mesh: {min_size: zero}", 1),
            "dims.yaml: entry 'bogus'",
        ),
        (lambda s: s + "\n  - {id: collective, name: dup}\n", "duplicate id"),
        (lambda s: s.replace("mesh: {min_size: 2}", "mesh: {min_sz: 2}", 1), "unknown mesh constraint"),
    ],
)
def test_broken_dims_file_one_line(tmp_path, edit, expect):
    tax, _ = _copy_tree(tmp_path)
    p = tax / "dims.yaml"
    p.write_text(edit(p.read_text()))
    with pytest.raises(TaxonomyError) as e:
        load_taxonomy(tax)
    assert "\n" not in str(e.value) and expect in str(e.value) and "dims.yaml" in str(e.value)


@pytest.mark.parametrize(
    "old, new, expect",
    [
        ("template: collectives/all_gather.py.j2", "template: collectives/missing.py.j2", "missing template"),
        (
            "workload: collective\n    realization: [all_gather]",
            "workload: collective\n    plan: [{dim: warp}]\n    realization: [all_gather]",
            "unknown dimension 'warp'",
        ),
        ("  - id: gather\n", "  - id: scatter\n", "duplicate"),
        (
            "level: 1\n    template: collectives/all_gather.py.j2",
            "level: one\n    template: collectives/all_gather.py.j2",
            "'level' must be int",
        ),
        (
            "dtypes: [bfloat16, float16, float32]\n    sizes: {smoke: {n: 2048}",
            "dtypes: [bfloat16, float12]\n    sizes: {smoke: {n: 2048}",
            "unknown dtype 'float12'",
        ),
        ("sizes: {smoke: {n: 2048}, full: {n: 33554432}}", "sizes: {smoke: {n: 2048}}", "lacks the 'full' class"),
        (
            "realization: [all_gather]",
            "realization: [all_gather]\n    plan: [{dim: pipeline, size: 1}]",
            "bad mesh constraint",
        ),
        ("realization: [all_gather]", "realization: [all_gather", "not valid YAML"),
    ],
)
def test_broken_family_entry_one_line(tmp_path, old, new, expect):
    tax, _ = _copy_tree(tmp_path)
    p = tax / "families" / "collectives.yaml"
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new, 1))
    with pytest.raises(TaxonomyError) as e:
        load_taxonomy(tax)
    msg = str(e.value)
    assert "\n" not in msg and "collectives.yaml" in msg and expect in msg, msg
