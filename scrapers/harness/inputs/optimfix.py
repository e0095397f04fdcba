"""Optimizers where the search guessed something else: `x.param_groups` on a tensor or list makes `x` a real
optimizer; a process group iterated or indexed as `param_groups` makes it parameter groups; an optimizer's
missing `self.state` is its per-parameter state (drawn by make/runtime/standin_optim.py)."""

from __future__ import annotations

import re
from typing import Any

from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.inputs.discovery.name_guess import guess_arg
from mgbench.scrapers.harness.inputs.failure import Failure
from mgbench.scrapers.harness.make.specedit import _all_args, _set_arg, _with, uses_kind
from mgbench.scrapers.harness.make.specs import OPTIM_PARAM_KINDS, PARAM_GROUPS_RE, optim_arg, optim_state


def state_attr_fix(spec: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """A method of an optimizer (its object already holds `param_groups`) missing `self.state`."""
    if name != "state" or not uses_kind(spec, OPTIM_PARAM_KINDS):
        return []
    return [_with(spec, lambda s: s["attrs"].append(optim_state("state")))]


def optimizer_fixes(spec: dict[str, Any], f: Failure, cand: Candidate) -> list[dict[str, Any]]:
    """Proposals after an error that shows an optimizer (or its parameter groups) guessed as another kind, or
    a parameter group missing a setting (`KeyError: 'use_muon'` on `group["use_muon"]`): the groups get it."""
    line, msg, out = f.line, f.msg, []
    args = {a["name"]: a for a in _all_args(spec)}
    key = f.missing_key
    if key:
        for user in re.findall(rf"(\w+)\s*\[\s*['\"]{key}['\"]", line):
            a = args.get(cand.loops.get(user, user))
            if a and a["kind"] in OPTIM_PARAM_KINDS and all(x["name"] != key for x in a.get("fields", [])):
                out.append(
                    _set_arg(spec, a["name"], {**a, "fields": a.get("fields", []) + [guess_arg(key, None, None)]})
                )
    m = re.search(r"'(Tensor|list|_MgNamespace|Module)' object has no attribute 'param_groups'", msg)
    if m:
        for user in re.findall(r"(?<![\w.])(?:self\.)?(\w+)\s*\.\s*param_groups\b", line):
            if user in args and args[user]["kind"] != "optimizer":
                out.append(_set_arg(spec, user, optim_arg(user)))
    if re.search(r"ProcessGroup' object is not (subscriptable|iterable)", msg):
        out += [
            _set_arg(spec, a["name"], optim_arg(a["name"], "param_groups"))
            for a in args.values()
            if a["kind"] == "group" and PARAM_GROUPS_RE.search(a["name"])
        ]
    return out
