"""Rules for lists and dicts where a tensor or an int was guessed (helpers: inputs/containerfix.py)."""

from __future__ import annotations

import re

from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.inputs.containerfix import container_fixes, grad_fix
from mgbench.scrapers.harness.inputs.failure import Failure
from mgbench.scrapers.harness.inputs.rules.base import Rule, Spec, Trigger
from mgbench.scrapers.harness.make import specs
from mgbench.scrapers.harness.make.specedit import _set_arg, suspects

PER_RANK_RE = r"expected length \d+, got \d+|list size should be \d+"  # one entry per rank


def per_rank_list(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """A tensor where a list of one tensor per rank is expected."""
    return [
        _set_arg(spec, a["name"], {**a, "kind": "tensors", "count": "ws"})
        for a in suspects(spec, f.line)
        if a["kind"] == "tensor"
    ]


def grad_params(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`params[0]`, `torch.stack(grads)` after keeping the tensors that have a gradient."""
    return grad_fix(spec, cand, {a["name"] for a in suspects(spec, f.line)})


def int_iterated(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """An int iterated or unpacked: a list of ws sizes."""
    return [
        _set_arg(spec, a["name"], specs.splits(a["name"], "n")) for a in suspects(spec, f.line) if a["kind"] == "int"
    ]


def _iterated(spec: Spec, f: Failure, cand: Candidate) -> bool:
    low = f.low  # (`not subscriptable` only when the message does not name a tensor)
    return (
        "object is not iterable" in low
        or "has no len" in low
        or "must be a list" in low
        or "list of" in low
        or ("not subscriptable" in low and "tensor" not in low)
    )


def tensor_iterated(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """A tensor iterated, measured or indexed like a list: one tensor per rank."""
    return per_rank_list(spec, f, cand)


RULES = [
    Rule("keyed_dict", 170, container_fixes),
    Rule(
        "per_rank_list",
        180,
        per_rank_list,
        Trigger(
            when=lambda spec, f, cand: bool(re.search(PER_RANK_RE, f.low)) or "list size, must be world size" in f.low
        ),
    ),
    Rule("grad_params", 230, grad_params, Trigger(words=("list index out of range", "non-empty"))),
    Rule(
        "int_iterated",
        300,
        int_iterated,
        Trigger(words=("'int' object is not iterable", "cannot unpack non-iterable int")),
    ),
    Rule("tensor_iterated", 310, tensor_iterated, Trigger(when=_iterated)),
]
