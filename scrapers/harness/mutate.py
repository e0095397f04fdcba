"""The harness search's proposals, as the rest of the code and the tests call them: `propose` runs the
rule registry (rules/registry.py) and `no_collective`/`unscaled_state` the degenerate-run proposals
(rules/degenerate.py)."""

from __future__ import annotations

from mgbench.scrapers.harness.guess import guess_field as _field
from mgbench.scrapers.harness.rules.degenerate import no_collective, unscaled_state
from mgbench.scrapers.harness.rules.registry import propose

__all__ = ["propose", "no_collective", "unscaled_state", "_field"]
