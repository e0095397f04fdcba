"""The harness driver's report (scrapers/harness/driver.py)."""

from __future__ import annotations


def test_report_gives_yield_with_and_without_test_files(tmp_path):
    import json

    from mgbench.scrapers.harness.driver import report
    from tests.harness.helpers import scrape_folder

    scrape = scrape_folder(tmp_path, ["grad_allreduce", "gather_out", "dict_arg", "divisible"])
    cands = [json.loads(x) for x in (scrape / "candidates.jsonl").read_text().splitlines()]
    cands[2]["role"] = "test"
    cands[0]["calls"] = cands[2]["calls"] = [{"op": "all_reduce"}, {"op": "barrier"}]
    cands[1]["calls"] = [{"op": "barrier"}, {"op": "all_gather_object"}]  # moves no tensor data
    cands[3]["calls"] = [{"op": "all_gather_into_tensor", "kind": "reference"}]  # an FX node, never called
    (scrape / "candidates.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cands))
    recs = [
        {
            "id": c["id"],
            "repo": "example/mined",
            "accepted": i == 0,
            "world_sizes": [2] if i == 0 else [],
            "reason": "" if i == 0 else "needs_import: pytest",
        }
        for i, c in enumerate(cands)
    ]
    (scrape / "harness.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    text = report(scrape)
    assert "| example/mined | 4 | 4 | 1 | 25% | 0 | 3 | 1 | 33% |" in text
    assert "| needs_import (test file) | 1 |" in text and "| needs_import | 2 |" in text
    assert "| objects/barrier only | 1 | 0 | 0% |" in text and "| tensor data | 2 | 1 | 50% |" in text
    assert "| referenced, not called | 1 | 0 | 0% |" in text
