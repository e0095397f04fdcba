"""Rules for optimizers guessed as another kind (optimfix.py)."""

from __future__ import annotations

from scrapers.harness.optimfix import optimizer_fixes
from scrapers.harness.rules.base import Rule

RULES = [
    Rule("optimizer", 30, optimizer_fixes),
]
