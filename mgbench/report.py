"""Terminal output helpers every stage prints with: a progress line with ETA, and plain-text tables.

Standard library only (validation imports it on GPU machines that have torch and nothing else)."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any


class Progress:
    """Prints `label [i/N] item status (elapsed, ETA)` lines to stderr.

    The ETA extrapolates from the items after the first: the first one also pays one-time start-up
    (rank pools, imports, the first compile), which made a 45 s job print "ETA 1845s"."""

    def __init__(self, total: int, label: str, stream: Any = None):
        self.total, self.label, self.done = total, label, 0
        self.t0 = time.monotonic()
        self.first: float | None = None  # when the first item finished
        self.stream = stream or sys.stderr

    def eta(self, now: float) -> str:
        left = self.total - self.done
        if left == 0:
            return "ETA 0s"
        if self.first is None or self.done < 2:
            return "ETA after the next item"
        return f"ETA {(now - self.first) / (self.done - 1) * left:.0f}s"

    def step(self, item: str, status: str = "") -> None:
        self.done += 1
        now = time.monotonic()
        if self.first is None:
            self.first = now
        print(
            f"{self.label} [{self.done}/{self.total}] {item} {status} ({now - self.t0:.0f}s elapsed, {self.eta(now)})",
            file=self.stream,
            flush=True,
        )


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    """A column-aligned text table."""
    cells = [[str(h) for h in header]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(c: Any) -> str:
    if isinstance(c, float):
        return f"{c:.4g}"
    return str(c)
