"""Rules on the entry's own signature: a required argument missing, an argument too many."""

from __future__ import annotations

import re

from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.inputs.discovery.name_guess import guess_arg, param_named
from mgbench.scrapers.harness.inputs.failure import Failure
from mgbench.scrapers.harness.inputs.rules.base import Rule, Spec, Trigger
from mgbench.scrapers.harness.make.specedit import _all_args, _with

MISSING_RE = r"missing (?:\d+ )?required (?:positional|keyword-only) arguments?: (.+)"
SURPLUS_RES = (r"unexpected keyword argument '(\w+)'", r"takes .* but (\d+) .* given")


def missing_argument(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`f() missing 1 required positional argument: 'x'`: the named parameters guessed and appended
    (keyword-passed when keyword-only, unknown or after a keyword argument)."""
    m = re.search(MISSING_RE, f.msg)
    assert m is not None  # the trigger's regex
    names = re.findall(r"'(\w+)'", m.group(1))

    def add(s: Spec) -> None:
        for nm in names:
            p = param_named(cand.record, nm)
            a = guess_arg(nm, p.get("annotation") if p else None, cand.docstring)
            if p is None or p["kind"] == "kwonly" or any(x.get("keyword") for x in s["args"]):
                a["keyword"] = True
            s["args"].append(a)

    return [_with(spec, add)]


def _surplus(spec: Spec, f: Failure, cand: Candidate) -> bool:
    return any(re.search(p, f.msg) for p in SURPLUS_RES)


def surplus_argument(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`got an unexpected keyword argument` / `takes 2 positional arguments but 3 were given`: the last
    argument dropped. A guessed callable's complaint (`gelu() got ... 'fan_in'`) is not the entry's:
    nothing proposed (the rule still ends the search for proposals: the entry's arguments are right)."""
    callee = re.match(r"([\w.]+)\(\)", f.msg)
    if callee and callee.group(1) in {a.get("value", "gelu") for a in _all_args(spec) if a["kind"] == "fn"}:
        return []
    return [_with(spec, lambda s: s["args"].pop())]


RULES = [
    Rule("missing_argument", 90, missing_argument, Trigger(raw_regex=MISSING_RE), exclusive=True),
    Rule("surplus_argument", 100, surplus_argument, Trigger(when=_surplus), exclusive=True),
]
