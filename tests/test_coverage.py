"""Coverage matrix (taxonomy/coverage.py) counts and the `mgbench taxonomy` command."""

from __future__ import annotations

import shutil
from pathlib import Path

from mgbench.cli import main
from mgbench.generator.spec import expand
from mgbench.taxonomy import load_taxonomy
from mgbench.taxonomy.commands import BEGIN, END
from mgbench.taxonomy.coverage import coverage_matrix, plan_label, to_markdown
from mgbench.taxonomy.loader import TAXONOMY_DIR


def _spec(family, dims, workload, plan=(), layout=None):
    return {"family": family, "dims": list(dims), "workload": workload, "plan": list(plan), "mesh_layout": layout}


SPECS = [
    _spec("ar", ["collective"], "collective"),
    _spec("ar", ["collective"], "collective"),
    _spec("tp_mlp", ["tensor"], "mlp", [{"dim": "tensor", "size": "world"}]),
    _spec(
        "agg",
        ["tensor", "sequence"],
        "gemm",
        [{"dim": "tensor", "size": "world"}, {"dim": "sequence", "size": "world"}],
    ),
    _spec(
        "tpdp",
        ["tensor", "data"],
        "gemm",
        [{"dim": "tensor", "size": 2}, {"dim": "data", "size": "rest"}],
        [{"dim": "data", "size": "rest"}, {"dim": "tensor", "size": 2}],
    ),
    _spec(
        "tpdp",
        ["tensor", "data"],
        "gemm",
        [{"dim": "tensor", "size": 2}, {"dim": "data", "size": "rest"}],
        [{"dim": "data", "size": "rest"}, {"dim": "tensor", "size": 2}],
    ),
]


def test_counts_put_multi_dim_tasks_in_every_dim_row():
    cov = coverage_matrix(SPECS, dims=["collective", "data", "tensor", "sequence", "expert"], workloads=["gemm", "mlp"])
    assert cov.tasks == 6
    assert cov.count("tensor", "gemm") == 3 and cov.count("data", "gemm") == 2 and cov.count("sequence", "gemm") == 1
    assert cov.count("tensor", "mlp") == 1 and cov.count("collective", "collective") == 2
    assert cov.dim_tasks["tensor"] == 4 and cov.workload_tasks["gemm"] == 3
    assert cov.workloads == ["gemm", "mlp", "collective"]  # given order, then the unlisted present ones
    assert cov.gaps() == ["expert"]
    assert cov.cell_families[("tensor", "gemm")] == {"agg", "tpdp"}
    plans = {p.plan: (p.axes, p.tasks, p.families) for p in cov.plans}
    assert plans == {
        "(none: bare collective)": (0, 2, ["ar"]),
        "tensor": (1, 1, ["tp_mlp"]),
        "tensor+sequence (one axis)": (1, 1, ["agg"]),
        "data=rest x tensor=2": (2, 2, ["tpdp"]),
    }


def test_markdown_has_matrix_and_plans():
    md = to_markdown(coverage_matrix(SPECS))
    assert "| dim \\ workload | collective | gemm | mlp | tasks |" in md
    assert "| tensor |  | 3 | 1 | 4 |" in md and "| all tasks | 2 | 3 | 1 | 6 |" in md
    assert "| data=rest x tensor=2 | tpdp | gemm | 2 |" in md
    assert "1 of them on a multi-dimension mesh (2 tasks)" in md


def test_plan_label():
    assert plan_label([]) == "(none: bare collective)"
    assert plan_label([{"dim": "pipeline", "size": 4}]) == "pipeline=4"
    assert plan_label([{"dim": "tensor", "size": "2"}, {"dim": "data", "size": "rest"}]) == "tensor=2 x data=rest"


def _subset(tmp_path: Path) -> Path:
    """The taxonomy with only the collectives and plans2d families (others change under us)."""
    root = tmp_path / "taxonomy"
    shutil.copytree(TAXONOMY_DIR, root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    for f in (root / "families").glob("*.yaml"):
        if f.name not in ("plans2d.yaml", "collectives.yaml"):
            f.unlink()
    return root


def test_plans2d_counts_from_the_taxonomy(tmp_path):
    tax = load_taxonomy(_subset(tmp_path))
    specs, _ = expand(tax)
    cov = coverage_matrix(specs, list(tax.dims), list(tax.workloads))
    multi = [p for p in cov.plans if p.axes == 2]
    assert len({f for p in multi for f in p.families}) == len([f for f in tax.families.values() if f.layout])
    assert cov.count("tensor", "attention") == 9 and cov.count("context_ring", "attention") == 15
    assert cov.count("expert", "moe") == 6 and cov.dim_tasks["pipeline"] == 6
    assert (
        sum(p.tasks for p in multi)
        == sum(cov.cells[(d, w)] for d in cov.dims for w in cov.workloads if d != "collective") // 2
    )


def test_cli_writes_markdown_between_markers(tmp_path, capsys):
    doc = tmp_path / "doc.md"
    doc.write_text(f"# Title\n\nprose\n\n{BEGIN}\nold table\n{END}\n\ntail\n")
    assert main(["taxonomy", "--markdown", str(doc), "--level", "3", "--taxonomy", str(_subset(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "Coverage: tasks per dim x workload" in out and "Compositions" in out and "Plans (" in out
    text = doc.read_text()
    assert text.startswith("# Title\n\nprose\n\n") and text.endswith(f"{END}\n\ntail\n") and "old table" not in text
    assert "### Coverage: tasks per parallelism dim x workload" in text and "### Parallelism dims" in text
