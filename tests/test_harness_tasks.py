"""Accepted harnesses become level-4 task modules that pass CPU validation without an oracle."""
from __future__ import annotations

import json

from generator.generate import generate
from scrapers.harness.crosscheck import agree
from scrapers.harness.driver import report, run
from scrapers.harness.search import Budget
from tests.harness_cases import scrape_folder
from validation.contract import check_contract
from validation.run import validate


def test_mined_tasks_render_validate_and_report(tmp_path):
    scrape = scrape_folder(tmp_path / "scrape", ["grad_allreduce", "gather_out", "writes"])
    run(scrape, budget=Budget(seconds=30, attempts=8, attempt_timeout_s=6, mem_mb=512), quiet=True)
    recs = [json.loads(x) for x in (scrape / "harness.jsonl").read_text().splitlines()]
    assert sorted(r["accepted"] for r in recs) == [False, True, True]
    text = report(scrape)
    assert "| example/mined | 3 | 3 | 2 | 67% |" in text and "sandbox_violation" in text

    out = tmp_path / "out"
    records, _ = generate(out, levels=[4], mined=scrape, mined_ungated=True)
    assert len(records) == 2 and all(r.spec["level"] == 4 for r in records)
    src = (out / records[0].module).read_text()
    assert "License: MIT" in src and "https://github.com/example/mined/blob/" in src and "lines 1-" in src
    assert "import scrapers" not in src and "def make_inputs(" in src and "def solution(" in src
    manifest = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert {m["provenance"]["repository"] for m in manifest} == {"example/mined"}

    results = validate(out, out / "results.jsonl", world_sizes=[2], quiet=True)
    assert [r.status for r in results] == ["passed", "passed"], [r.reason for r in results]
    for r in results:
        assert r.checks["matches_oracle"] is None
        assert r.checks["rejects_zeros"] and r.checks["rejects_other_seed"] and r.checks["rejects_echo_inputs"]

    # gloo fingerprints recorded for the NCCL comparison; a perturbed one disagrees
    fp = manifest[0]["harness_fingerprints"]["ws2"][0]
    assert agree(fp, dict(fp))[0]
    assert not agree(fp, {**fp, "sum": fp["sum"] + 1.0 + abs(fp["sum"])})[0]


def test_regenerate_is_byte_identical(tmp_path):
    scrape = scrape_folder(tmp_path / "scrape", ["grad_allreduce"])
    run(scrape, budget=Budget(seconds=30, attempts=8, attempt_timeout_s=6, mem_mb=512), quiet=True)
    out = tmp_path / "out"
    first, _ = generate(out, levels=[4], mined=scrape, mined_ungated=True)
    second, _ = generate(out, levels=[4], mined=scrape, mined_ungated=True)
    assert [r.content_hash for r in first] == [r.content_hash for r in second]
    from validation.contract import load_module
    check_contract(load_module(out / first[0].module), "mined")
