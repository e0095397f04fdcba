"""Rules for optimizers guessed as another kind (inputs/optimfix.py)."""

from __future__ import annotations

from mgbench.scrapers.harness.inputs.optimfix import optimizer_fixes
from mgbench.scrapers.harness.inputs.rules.base import Rule

RULES = [
    Rule("optimizer", 30, optimizer_fixes),
]
