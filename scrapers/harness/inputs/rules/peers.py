"""Rules for ranks guessed as 0 that talk to themselves (inputs/peerfix.py)."""

from __future__ import annotations

from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.inputs.failure import Failure
from mgbench.scrapers.harness.inputs.peerfix import SELF_TALK, peer_fixes
from mgbench.scrapers.harness.inputs.rules.base import Rule, Spec, Trigger


def self_talk(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """A rank sending to itself: rank-named integers redrawn per rank (own, next, previous)."""
    return peer_fixes(spec, f.low, f.line)


RULES = [
    Rule("self_talk", 40, self_talk, Trigger(words=SELF_TALK)),
]
