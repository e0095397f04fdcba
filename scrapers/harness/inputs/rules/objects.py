"""Rules for objects and dicts where a tensor or namespace was guessed: `arg.X`, `arg[X]`, `**arg`."""

from __future__ import annotations

import re

from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.inputs.discovery.name_guess import guess_field
from mgbench.scrapers.harness.inputs.failure import Failure
from mgbench.scrapers.harness.inputs.rules.base import Rule, Spec, Trigger
from mgbench.scrapers.harness.inputs.rules.groups import STATE_GETTER_RE
from mgbench.scrapers.harness.make import specs
from mgbench.scrapers.harness.make.specedit import _all_args, _set_arg

DICT_METHODS = ("items", "keys", "values", "get")
DICT_NAME_RE = re.compile(r"(^|_)(dict|dicts|state|sd|map|batch|nested)($|_)")  # an argument that may be a dict


def object_fix(spec: Spec, line: str, owner: str, attr: str) -> list[Spec]:
    """`'Tensor'/'_MgNamespace' object has no attribute X` or `KeyError: X`: the argument used as `arg.X`
    (or `arg[X]`) is a config/namespace (or dict) object; give it field X. A group/size/rank getter
    (`arg.get_dp_group()`) makes it a parallel-state object."""
    users = re.findall(rf"(\w+)\s*(?:\.\s*{re.escape(attr)}\b|\[\s*['\"]{re.escape(attr)}['\"])", line)
    if attr in DICT_METHODS:
        users += re.findall(rf"(\w+)\s*\.\s*{attr}\b", line)
        if owner == "Tensor" and not any(a["name"] in users for a in _all_args(spec)):  # through a helper
            tensors = [a["name"] for a in _all_args(spec) if a["kind"] == "tensor"]
            named = [t for t in tensors if DICT_NAME_RE.search(t.lower())]
            users += named or (tensors if len(tensors) == 1 else [])
    out = []
    for a in _all_args(spec):
        if a["name"] not in users and not (owner == "KeyError" and a.get("dict")):
            continue
        if owner != "KeyError" and STATE_GETTER_RE.match(attr):  # `self.dist_index.get_dp_group()`
            out.append(_set_arg(spec, a["name"], specs.group(a["name"], "state")))
            continue
        if a["kind"] == "namespace":
            if all(f["name"] != attr for f in a["fields"]) and attr not in DICT_METHODS:
                out.append(_set_arg(spec, a["name"], {**a, "fields": a["fields"] + [guess_field(attr)]}))
        elif a["kind"] == "tensor" and owner == "Tensor" and attr in ("append", "extend", "insert"):
            out.append(_set_arg(spec, a["name"], {**a, "kind": "tensors", "count": "0"}))  # a list to fill
        elif a["kind"] in ("tensor", "tensors") and owner == "Tensor":
            as_dict = attr in DICT_METHODS
            if a["kind"] == "tensor" and not as_dict and all(f["name"] != attr for f in a.get("fields", [])):
                out.append(_set_arg(spec, a["name"], {**a, "fields": a.get("fields", []) + [guess_field(attr)]}))
            fields = [{**guess_field(k), "replicated": False} for k in ("w0", "w1")] if as_dict else [guess_field(attr)]
            out.append(_set_arg(spec, a["name"], specs.namespace(a["name"], fields, as_dict=as_dict)))
    return out


def object_field(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`'Tensor'/'_MgNamespace' object has no attribute X`: an object with field X."""
    assert f.no_attr is not None
    return object_fix(spec, f.line, f.no_attr.group(1), f.no_attr.group(2))


def key_field(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`KeyError: X` on a synthesized dict or a subscripted argument: the key X added."""
    assert f.missing_key is not None
    return object_fix(spec, f.line, "KeyError", f.missing_key)


def subscript_dict(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`arg["key"]` on the failing line: a namespace subscripted becomes a dict with that key (when the
    message says not subscriptable), another kind a dict of that key."""
    out = []
    for user, key in re.findall(r"(\w+)\s*\[\s*['\"](\w+)['\"]\s*\]", f.line):
        for a in _all_args(spec):
            if a["name"] == user and a["kind"] == "namespace" and not a.get("dict") and "subscriptable" in f.low:
                out.append(
                    _set_arg(spec, user, {**a, "dict": True, "fields": a.get("fields", []) + [guess_field(key)]})
                )
            elif a["name"] == user and a["kind"] != "namespace":
                out.append(_set_arg(spec, user, specs.namespace(user, [guess_field(key)], as_dict=True)))
    return out


def mapping(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`f(**kw)`, `{**kw}` on a tensor: an empty dict."""
    return [
        _set_arg(spec, a["name"], specs.namespace(a["name"], [], as_dict=True))
        for a in _all_args(spec)
        if a["kind"] == "tensor" and re.search(rf"\*\*\s*{re.escape(a['name'])}\b", f.line)
    ]


RULES = [
    Rule(
        "object_field",
        130,
        object_field,
        Trigger(when=lambda spec, f, cand: f.no_attr is not None and f.no_attr.group(1) in ("Tensor", "_MgNamespace")),
    ),
    Rule("key_field", 140, key_field, Trigger(when=lambda spec, f, cand: f.missing_key is not None)),
    Rule("subscript_dict", 150, subscript_dict),
    Rule(
        "mapping",
        160,
        mapping,
        Trigger(words=("must be a mapping, not tensor", "'tensor' object is not a mapping")),
    ),
]
