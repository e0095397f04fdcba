"""Rules for module globals the extracted code lacks (`NameError` inside the candidate)."""

from __future__ import annotations

import re

from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.inputs.discovery.name_guess import GROUP_RE, NAMESPACE_RE, guess_field
from mgbench.scrapers.harness.inputs.failure import Failure
from mgbench.scrapers.harness.inputs.rules.base import Rule, Spec, Trigger
from mgbench.scrapers.harness.make import specs
from mgbench.scrapers.harness.make.specedit import _with

LOG_RE = re.compile(r"(see_memory_usage|(print|log|debug|warn|report|nvtx)(_\w+)?|\w+_(log|print|nvtx\w*))$")
UNDEFINED_RE = r"name '(\w+)' is not defined"


def missing_global(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`NameError: name 'HIDDEN_SIZE' is not defined`: a module global (a constant, or a group/args set by
    an init function) guessed from its name; a logging call used as a statement becomes a no-op."""
    m = re.search(UNDEFINED_RE, f.msg)
    assert m is not None
    name = m.group(1)
    low = name.lstrip("_").lower()
    if (
        LOG_RE.match(low)
        and re.match(rf"\s*{name}\s*\(", f.line)
        and not any(g["name"] == name for g in spec.get("globals", []))
    ):  # a logging call as a statement
        return [_with(spec, lambda s: s.setdefault("globals", []).append(specs.fn(name, "noop")))]
    if not (
        re.fullmatch(r"_*[A-Z][A-Z0-9_]*", name)
        or GROUP_RE.search(low)
        or NAMESPACE_RE.search(low)
        or guess_field(low)["kind"] in ("dtype", "device", "int", "float")
    ):  # `dtype`, `world_size`
        return []
    if any(g["name"] == name for g in spec.get("globals", [])):
        return []
    a = guess_field(name.lstrip("_").lower())
    a["name"] = name
    return [_with(spec, lambda s: s.setdefault("globals", []).append(a))]


RULES = [
    Rule(
        "missing_global",
        50,
        missing_global,
        Trigger(raw_regex=UNDEFINED_RE, types=frozenset({"NameError"}), when=lambda spec, f, cand: f.in_candidate),
    ),
]
