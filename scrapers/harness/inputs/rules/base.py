"""A search rule: a named trigger and a proposal function with one signature (see order.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.inputs.failure import Failure

Spec = dict[str, Any]
Propose = Callable[[Spec, Failure, Candidate], list[Spec]]
Predicate = Callable[[Spec, Failure, Candidate], bool]


@dataclass(frozen=True)
class Trigger:
    """When a rule fires; every condition given must hold (an empty Trigger always fires):
    `words`: one of them is in the lower-cased message; `regex`: it searches the lower-cased message
    (`raw_regex`: the message as raised); `types`: the error's type is one of them; `when`: a predicate."""

    words: tuple[str, ...] = ()
    regex: str = ""
    raw_regex: str = ""
    types: frozenset[str] = frozenset()
    when: Predicate | None = None

    def fires(self, spec: Spec, f: Failure, cand: Candidate) -> bool:
        return (
            (not self.words or any(w in f.low for w in self.words))
            and (not self.regex or re.search(self.regex, f.low) is not None)
            and (not self.raw_regex or re.search(self.raw_regex, f.msg) is not None)
            and (not self.types or f.type in self.types)
            and (self.when is None or self.when(spec, f, cand))
        )


ALWAYS = Trigger()


@dataclass(frozen=True)
class Rule:
    """`priority`: lower runs first (proposals keep that order). `exclusive`: when it fires, what it
    proposes is appended to what the rules before it proposed and no later rule runs."""

    name: str
    priority: int
    propose: Propose
    trigger: Trigger = field(default=ALWAYS)
    exclusive: bool = False
    doc: str = ""
