"""Docs are design, results are history: no heading under docs/ is a dated pass or measurement
section, the design docs point to results/README.md for their figures, and results/README.md has a
row for every folder of results/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
RESULTS = ROOT / "results"

ORDINALS = "first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth"
DATED_HEADING = re.compile(
    rf"^#+ .*(Measured|\d{{4}}-\d{{2}}-\d{{2}}|\b({ORDINALS}|\d+(st|nd|rd|th))( full)? pass\b"
    r"|\b(pass|session|iteration|round) \d+\b)",
    re.IGNORECASE,
)


def headings(text: str) -> list[str]:
    """Markdown headings of `text`, leaving out lines of fenced code blocks (shell comments start with #)."""
    out, fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#+ ", line):
            out.append(line)
    return out


def test_the_pattern_catches_a_dated_pass_section_and_spares_design_headings():
    assert DATED_HEADING.match("## Measured (2026-12-03, seventh pass: curated entries)")
    assert DATED_HEADING.match("### Third full pass")
    assert DATED_HEADING.match("## Yield of the 2nd pass")
    assert DATED_HEADING.match("## Results of 2026-12-01")
    assert not DATED_HEADING.match("## The gates (scrapers/level4/gate.py, select.py)")
    assert not DATED_HEADING.match("## Settling: output mode, changed inputs and the full size")
    assert headings("```\n# 1. generate (login node)\n```\n## Tests\n") == ["## Tests"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_doc_heading_is_a_dated_pass_or_measurement_section(doc):
    dated = [h for h in headings(doc.read_text()) if DATED_HEADING.match(h)]
    assert not dated, f"{doc.relative_to(ROOT)}: move these sections to results/ (results/README.md): {dated}"


@pytest.mark.parametrize("name", ["level4-gate.md", "scrapers.md", "harness.md"])
def test_design_docs_point_to_results_for_their_figures(name):
    text = (ROOT / "docs" / name).read_text()
    assert "Current figures" in text and "results/README.md" in text


def test_every_results_folder_has_a_row_in_results_readme():
    index = (RESULTS / "README.md").read_text()
    rows = [line for line in index.splitlines() if line.startswith("| ") and "---" not in line]
    folders = sorted(p.name for p in RESULTS.iterdir() if p.is_dir())
    assert folders
    missing = [f for f in folders if not any(f"]({f}/" in row for row in rows)]
    assert not missing, f"results/README.md has no row for {missing}"
    for f in folders:
        assert (RESULTS / f / "README.md").is_file() or (RESULTS / f / "NOTES.md").is_file(), f
