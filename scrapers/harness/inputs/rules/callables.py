"""Rules for callables: a guessed callable called the wrong way, a value called, a tensor called."""

from __future__ import annotations

import re

from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.inputs.failure import Failure
from mgbench.scrapers.harness.inputs.rules.base import Rule, Spec, Trigger
from mgbench.scrapers.harness.make import specs
from mgbench.scrapers.harness.make.specedit import _all_args, _set_arg, suspects

CALLED_AS = {
    "list": ("tensors", "splits"),
    "bool": ("bool",),
    "int": ("int",),
    "float": ("float",),
    "NoneType": ("none",),
    "str": ("path",),
}  # `'list' object is not callable`: kinds drawn so


def wrong_call(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """A guessed callable called the wrong way (`gelu() missing 1 required positional argument`), or a
    non-callable value called (`'list' object is not callable`): the argument becomes a no-op callable that
    accepts anything (a tensor called still becomes gelu first, `tensor_called`)."""
    out = []
    m = re.match(r"(\w+)\(\) (?:missing|got an unexpected|takes)", f.msg)
    if m:
        out += [
            _set_arg(spec, a["name"], specs.fn(a["name"], "noop"))
            for a in _all_args(spec)
            if a["kind"] == "fn" and a.get("value", "gelu") == m.group(1)
        ]
    m = re.search(r"'(\w+)' object is not callable", f.msg)
    kinds = CALLED_AS.get(m.group(1) if m else "", ())
    if kinds:
        out += [
            _set_arg(spec, a["name"], specs.fn(a["name"], "noop")) for a in suspects(spec, f.line) if a["kind"] in kinds
        ]
    return out


def tensor_called(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`self.projection(x)` on a tensor or list: the callee (else every suspect) becomes gelu."""
    sus = suspects(spec, f.line)
    called = set(re.findall(r"(?<![\w.])(?:self\.)?(\w+)\s*\(", f.line))
    return [
        _set_arg(spec, a["name"], specs.fn(a["name"], "gelu"))
        for a in [a for a in sus if a["name"] in called] or sus
        if a["kind"] in ("tensor", "tensors")
    ]


RULES = [
    Rule("wrong_call", 60, wrong_call),
    Rule(
        "tensor_called",
        270,
        tensor_called,
        Trigger(words=("'tensor' object is not callable", "'list' object is not callable")),
    ),
]
