"""Rules for optimizers guessed as another kind (optimfix.py)."""

from __future__ import annotations

from mgbench.scrapers.harness.optimfix import optimizer_fixes
from mgbench.scrapers.harness.rules.base import Rule

RULES = [
    Rule("optimizer", 30, optimizer_fixes),
]
