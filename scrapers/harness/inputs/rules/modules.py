"""Rules for models: `model.parameters()` on a guessed tensor, Megatron's list of model chunks."""

from __future__ import annotations

import re

from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.inputs.failure import Failure
from mgbench.scrapers.harness.inputs.rules.base import Rule, Spec, Trigger
from mgbench.scrapers.harness.make import specs
from mgbench.scrapers.harness.make.specedit import _all_args, _set_arg, suspects

MODULE_METHODS = (
    "parameters",
    "named_parameters",
    "buffers",
    "named_buffers",
    "modules",
    "named_modules",
    "children",
    "state_dict",
    "zero_grad",
)


def model_methods(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`model.parameters()` on a guessed tensor/list/namespace (`... is not callable`, `no attribute
    'parameters'`): the argument is a model; per-rank weights first, then replicated ones. A loop variable
    over an argument (`for chunk in model: chunk.parameters()`) makes the argument a list of models."""
    users = re.findall(rf"(\w+)\s*\.\s*(?:{'|'.join(MODULE_METHODS)})\s*\(", f.line)
    if not users and re.search(rf"\b(?:{'|'.join(MODULE_METHODS)})\b", f.low):  # a helper looked for it
        users = [
            a["name"]
            for a in _all_args(spec)
            if re.search(r"(^|_)(model|module)s?($|_)", a["name"].lower())
            and a["kind"] in ("tensor", "tensors", "namespace")
        ]
    chunked = {cand.loops[u] for u in users if u in cand.loops}
    return [
        _set_arg(spec, a["name"], specs.module(a["name"], replicated=rep, chunks=a["name"] in chunked))
        for a in _all_args(spec)
        if (a["name"] in users or a["name"] in chunked)
        and (a["kind"] != "module" or a["name"] in chunked and "chunks" not in a)
        for rep in (False, True)
    ]


def model_chunks(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """A model iterated or indexed (Megatron's model: a list of model chunks): two chunks."""
    return [
        _set_arg(spec, a["name"], {**a, "chunks": 2})
        for a in suspects(spec, f.line)
        if a["kind"] == "module" and "chunks" not in a
    ]


RULES = [
    Rule("model_methods", 120, model_methods, Trigger(words=("not callable", "attribute"))),
    Rule(
        "model_chunks",
        280,
        model_chunks,
        Trigger(regex=r"'module' object is not (iterable|subscriptable)|object of type 'module' has no len"),
    ),
]
