"""End-to-end: the search's trace and its early end when every attempt fails alike."""

from __future__ import annotations

import pytest

from mgbench.scrapers.harness.inputs.search import synthesize
from tests.harness.helpers import CODE, FAST_8_NO_WS4, FAST_12, candidate, entry_candidate

pytestmark = pytest.mark.sandboxed  # runs candidates or tasks through child rank processes


def test_trace_reports_every_attempt():
    """--trace: one line per attempt with the spec tried and its outcome, ending in the accepted one."""
    lines: list[str] = []
    res = synthesize(*candidate("divisible"), FAST_12, lines.append)
    assert res.accepted and 1 <= len(lines) <= res.attempts
    assert lines[0].startswith("#1 ws2 ") and "hidden:" in lines[0] and lines[-1].split("-> ")[1].startswith("ok")


def test_an_entry_that_always_fails_alike_ends_before_the_budget():
    cand, _ = entry_candidate(CODE, "stubborn", params=["x"])
    res = synthesize(cand, CODE, FAST_8_NO_WS4)
    assert not res.accepted and res.reason.startswith("search_exhausted"), res.reason
    assert res.attempts < FAST_8_NO_WS4.attempts
