"""The search rules in priority order and their runner: the next specs to try after a failure."""

from __future__ import annotations

from typing import Any

from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.inputs.failure import Failure
from mgbench.scrapers.harness.inputs.rules import (
    args,
    attrs,
    callables,
    containers,
    groups,
    modules,
    names,
    objects,
    optim,
    peers,
    sizes,
    values,
)
from mgbench.scrapers.harness.inputs.rules.base import Rule, Spec

FAMILIES = (args, attrs, callables, containers, groups, modules, names, objects, optim, peers, sizes, values)


def ordered(rules: list[Rule]) -> list[Rule]:
    """Rules by priority; two rules with one priority or one name are a mistake in the tables."""
    out = sorted(rules, key=lambda r: r.priority)
    for a, b in zip(out, out[1:]):
        if a.priority == b.priority:
            raise ValueError(f"search rules {a.name!r} and {b.name!r} share priority {a.priority}")
    names = [r.name for r in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"search rules named twice: {sorted(dup)}")
    return out


RULES: list[Rule] = ordered([r for fam in FAMILIES for r in fam.RULES])


def propose_named(
    spec: Spec, failure: Failure, cand: Candidate, rules: list[Rule] | None = None
) -> list[tuple[str, Spec]]:
    """(rule name, spec) of every proposal after `failure`, most specific first."""
    out: list[tuple[str, Spec]] = []
    for rule in RULES if rules is None else rules:
        if not rule.trigger.fires(spec, failure, cand):
            continue
        out += [(rule.name, s) for s in rule.propose(spec, failure, cand)]
        if rule.exclusive:
            break
    return out


def propose(spec: Spec, err: Failure | dict[str, Any], cand: Candidate | dict[str, Any]) -> list[Spec]:
    """Next specs to try after `err` (most specific first); dicts are accepted for the error record and
    the candidate (see Failure.of, Candidate.of)."""
    return [s for _, s in propose_named(spec, Failure.of(err), Candidate.of(cand))]


def fired(spec: Spec, err: Failure | dict[str, Any], cand: Candidate | dict[str, Any]) -> list[str]:
    """Names of the rules that proposed something, in order (each once)."""
    out: list[str] = []
    for name, _ in propose_named(spec, Failure.of(err), Candidate.of(cand)):
        if name not in out:
            out.append(name)
    return out


def table() -> str:
    """The registry as text, one rule a line: priority, name, family, exclusive, first docstring line."""
    rows = []
    for r in RULES:
        doc = (r.doc or r.propose.__doc__ or "").strip().splitlines()
        family = next(m.__name__.rsplit(".", 1)[-1] for m in FAMILIES if r in m.RULES)
        rows.append(
            f"{r.priority:4d}  {r.name:20s} {family:11s} {'exclusive' if r.exclusive else '':9s}  "
            f"{doc[0][:60] if doc else ''}"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
