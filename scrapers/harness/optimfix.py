"""Optimizers where the search guessed something else: `x.param_groups` on a tensor or list makes `x` a real
optimizer; a process group iterated or indexed as `param_groups` makes it parameter groups; an optimizer's
missing `self.state` is its per-parameter state (drawn by standin_optim.py)."""
from __future__ import annotations

import re
from typing import Any

from scrapers.harness.specedit import _all_args, _set_arg, _with, candidate_loops, uses_kind

PARAM_GROUPS_RE = re.compile(r"(^|_)param_groups$")
OPTIM_PARAM_KINDS = ("optimizer", "param_groups")       # draw parameters with gradients (standin_optim.py)
OPTIM_KINDS = OPTIM_PARAM_KINDS + ("optim_state",)


def optim_arg(name: str, kind: str = "optimizer") -> dict[str, Any]:
    """A real optimizer ("optimizer") or its one parameter group (`[{"params": [...], "lr": ..., "betas":
    ...}]`, "param_groups") over `ws` 2-D parameters with gradients."""
    return {"name": name, "kind": kind, "shape": ["n", "n"], "count": "ws", "dtype": "float32"}


def state_attr_fix(spec: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """A method of an optimizer (its object already holds `param_groups`) missing `self.state`."""
    if name != "state" or not uses_kind(spec, OPTIM_PARAM_KINDS):
        return []
    return [_with(spec, lambda s: s["attrs"].append({"name": "state", "kind": "optim_state"}))]


def optimizer_fixes(spec: dict[str, Any], err: dict[str, Any], msg: str, cand: dict[str, Any]) -> list[dict[str, Any]]:
    """Proposals after an error that shows an optimizer (or its parameter groups) guessed as another kind, or
    a parameter group missing a setting (`KeyError: 'use_muon'` on `group["use_muon"]`): the groups get it."""
    line, out = err.get("line", ""), []
    args = {a["name"]: a for a in _all_args(spec)}
    key = re.fullmatch(r"'(\w+)'", msg.strip()) if err.get("type") == "KeyError" else None
    if key:
        from scrapers.harness.guess import guess_arg
        loops = candidate_loops(cand)
        for user in re.findall(rf"(\w+)\s*\[\s*['\"]{key.group(1)}['\"]", line):
            a = args.get(loops.get(user, user))
            if a and a["kind"] in OPTIM_PARAM_KINDS and \
                    all(f["name"] != key.group(1) for f in a.get("fields", [])):
                out.append(_set_arg(spec, a["name"], {**a, "fields": a.get("fields", []) + [
                    guess_arg(key.group(1), None, None)]}))
    m = re.search(r"'(Tensor|list|_MgNamespace|Module)' object has no attribute 'param_groups'", msg)
    if m:
        for user in re.findall(r"(?<![\w.])(?:self\.)?(\w+)\s*\.\s*param_groups\b", line):
            if user in args and args[user]["kind"] != "optimizer":
                out.append(_set_arg(spec, user, optim_arg(user)))
    if re.search(r"ProcessGroup' object is not (subscriptable|iterable)", msg):
        out += [_set_arg(spec, a["name"], optim_arg(a["name"], "param_groups")) for a in args.values()
                if a["kind"] == "group" and PARAM_GROUPS_RE.search(a["name"])]
    return out
