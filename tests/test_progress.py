"""Progress lines: the ETA is extrapolated from the items after the first, whose time includes the
one-time start-up (a 45 s job printed "ETA 1845s" after its first item)."""

from __future__ import annotations

import io

import mgbench.report as report


def test_eta_ignores_the_start_up_of_the_first_item(monkeypatch):
    clock = iter([0.0, 40.0, 41.0, 42.0])  # start, item 1 (39 s start-up + 1 s), then 1 s per item
    monkeypatch.setattr(report.time, "monotonic", lambda: next(clock))
    out = io.StringIO()
    prog = report.Progress(45, "validate", stream=out)
    prog.step("a", "PASSED")
    prog.step("b", "PASSED")
    prog.step("c", "PASSED")
    lines = out.getvalue().splitlines()
    assert "ETA after the next item" in lines[0]
    assert lines[1].endswith("(41s elapsed, ETA 43s)"), lines[1]
    assert lines[2].endswith("(42s elapsed, ETA 42s)"), lines[2]


def test_eta_of_the_last_item_is_zero():
    out = io.StringIO()
    prog = report.Progress(1, "eval", stream=out)
    prog.step("only")
    assert out.getvalue().rstrip().endswith("ETA 0s)")
