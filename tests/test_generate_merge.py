"""A filtered `generate` adds to or updates OUT's task set and never shrinks it; publish says loudly
when a dataset folder loses tasks; `--mined` alone renders the mined tasks only."""

from __future__ import annotations

import json
from pathlib import Path

from mgbench.dataset.fixtures import write_fake_results
from mgbench.generator import generate


def ids(out: Path) -> list[str]:
    return [json.loads(x)["task_id"] for x in (out / "manifest.jsonl").read_text().splitlines()]


def modules(out: Path) -> set[str]:
    return {p.stem for p in (out / "tasks").glob("*.py")}


def test_generating_one_family_keeps_the_tasks_of_the_others(tmp_path):
    out = tmp_path / "out"
    generate(out, families=["all_reduce", "broadcast"], dtypes=["bf16"], check_import=False)
    first = ids(out)
    assert any("broadcast" in t for t in first) and any("all_reduce" in t for t in first)
    recs, _ = generate(out, families=["gemm_ar"], check_import=False)  # README "Add a task family"
    assert recs and all(r.spec["family"] == "gemm_ar" for r in recs)
    now = ids(out)
    assert set(first) <= set(now) and {r.task_id for r in recs} <= set(now)
    assert now == sorted(now) and modules(out) == set(now)
    generate(out, families=["all_reduce"], dtypes=["bf16"], check_import=False)  # an update changes nothing
    assert ids(out) == now
    generate(out, families=["gemm_ar"], dtypes=["fp32"], check_import=False, replace=True)
    assert ids(out) == ["l2-gemm_ar-fp32"] and modules(out) == {"l2-gemm_ar-fp32"}


def test_a_covered_task_no_longer_produced_is_dropped(tmp_path):
    out = tmp_path / "out"
    generate(out, families=["broadcast"], dtypes=["bf16"], check_import=False)
    generate(out, families=["gemm_ar"], dtypes=["bf16"], check_import=False)
    lines = (out / "manifest.jsonl").read_text().splitlines()
    ghost = json.loads(lines[-1]) | {"task_id": "l2-gemm_ar-gone-bf16", "module": "tasks/l2-gemm_ar-gone-bf16.py"}
    (out / "tasks" / "l2-gemm_ar-gone-bf16.py").write_text("# a variant since removed from the taxonomy\n")
    (out / "manifest.jsonl").write_text("\n".join(lines + [json.dumps(ghost)]) + "\n")
    generate(out, families=["gemm_ar"], dtypes=["bf16"], check_import=False)
    assert "l2-gemm_ar-gone-bf16" not in ids(out) and "l2-gemm_ar-gone-bf16" not in modules(out)
    assert any("broadcast" in t for t in ids(out))


def test_mined_alone_renders_only_mined_tasks_and_keeps_the_rest(tmp_path):
    out, scrape = tmp_path / "out", tmp_path / "scrape"
    scrape.mkdir()
    (scrape / "candidates.jsonl").write_text("")
    (scrape / "harness.jsonl").write_text("")
    generate(out, families=["broadcast"], dtypes=["bf16"], check_import=False)
    before = ids(out)
    recs, _ = generate(out, mined=scrape, check_import=False, mined_ungated=True)
    assert recs == [] and ids(out) == before


def test_publish_warns_when_the_dataset_loses_tasks(tmp_path, capsys):
    from mgbench.cli import main

    out = tmp_path / "out"
    publish = ["publish", "--out", str(out), "--results-root", str(out / "results")]
    generate(out, families=["all_reduce", "broadcast"], dtypes=["bf16"], check_import=False)
    write_fake_results(out / "results", out)
    assert main(publish) == 0
    assert "WARNING" not in capsys.readouterr().err
    generate(out, families=["gemm_ar"], dtypes=["bf16"], check_import=False)  # grows: no warning
    write_fake_results(out / "results", out)
    assert main(publish) == 0
    assert "WARNING" not in capsys.readouterr().err
    generate(out, families=["gemm_ar"], dtypes=["bf16"], check_import=False, replace=True)
    assert main(publish) == 0
    err = capsys.readouterr().err
    warning = [x for x in err.splitlines() if x.startswith("WARNING: the dataset lost")]
    assert warning and "l1-broadcast" in warning[0], err
