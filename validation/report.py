"""Terminal output helpers: a progress line with ETA, and plain-text tables."""
from __future__ import annotations

import sys
import time
from typing import Any, Sequence


class Progress:
    """Prints `label [i/N] item status (elapsed, ETA)` lines to stderr."""

    def __init__(self, total: int, label: str, stream: Any = None):
        self.total, self.label, self.done = total, label, 0
        self.t0 = time.monotonic()
        self.stream = stream or sys.stderr

    def step(self, item: str, status: str = "") -> None:
        self.done += 1
        el = time.monotonic() - self.t0
        eta = el / self.done * (self.total - self.done)
        print(f"{self.label} [{self.done}/{self.total}] {item} {status} "
              f"({el:.0f}s elapsed, ETA {eta:.0f}s)", file=self.stream, flush=True)


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
