"""Rules on a method's object state: `'Cls' object has no attribute 'x'` on the bare instance."""

from __future__ import annotations

from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.inputs.discovery.name_guess import guess_arg
from mgbench.scrapers.harness.inputs.failure import Failure
from mgbench.scrapers.harness.inputs.optimfix import state_attr_fix
from mgbench.scrapers.harness.inputs.rules.base import Rule, Spec, Trigger
from mgbench.scrapers.harness.inputs.statefix import state_from_init
from mgbench.scrapers.harness.make.specedit import _with


def _own_object(spec: Spec, f: Failure, cand: Candidate) -> bool:
    """The missing attribute is the method's own object's (`'RowLinear' object has no attribute ...`)."""
    return f.no_attr is not None and cand.kind == "method" and f.no_attr.group(1) == cand.owner


def object_state(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """The object's optimizer state (statefix/optimfix), all its `__init__` state at once, then the one
    attribute guessed from its name (not when the class defines the name: a failing property, not set)."""
    assert f.no_attr is not None
    nm = f.no_attr.group(2)
    a = guess_arg(nm.lstrip("_"), None, None)
    a["name"] = nm
    if a["kind"] == "tensor":
        a["replicated"] = True
    single = [] if nm in cand.defined else [_with(spec, lambda s: s["attrs"].append(a))]
    return state_attr_fix(spec, nm) + state_from_init(spec, cand, nm) + single


RULES = [
    Rule("object_state", 110, object_state, Trigger(when=_own_object), exclusive=True),
]
