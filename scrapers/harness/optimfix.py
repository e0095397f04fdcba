"""Optimizers where the search guessed something else: `x.param_groups` on a tensor or list makes `x` a real
optimizer; a process group iterated or indexed as `param_groups` makes it parameter groups; an optimizer's
missing `self.state` is its per-parameter state (drawn by standin_optim.py)."""
from __future__ import annotations

import re
from typing import Any

from scrapers.harness.specedit import _all_args, _set_arg, _with, candidate_loops

PARAM_GROUPS_RE = re.compile(r"(^|_)param_groups$")


def optimizer_arg(name: str) -> dict[str, Any]:
    """A real optimizer over `ws` 2-D parameters with gradients."""
    return {"name": name, "kind": "optimizer", "shape": ["n", "n"], "count": "ws", "dtype": "float32"}


def param_groups_arg(name: str) -> dict[str, Any]:
    """One parameter group (`[{"params": [...], "lr": ..., "betas": ...}]`) over `ws` 2-D parameters."""
    return {"name": name, "kind": "param_groups", "shape": ["n", "n"], "count": "ws", "dtype": "float32"}


def _optimizer_object(spec: dict[str, Any]) -> bool:
    return any(a["kind"] in ("optimizer", "param_groups") for a in _all_args(spec))


def state_attr_fix(spec: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """A method of an optimizer (its object already holds `param_groups`) missing `self.state`."""
    if name != "state" or not _optimizer_object(spec):
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
            if a and a["kind"] in ("optimizer", "param_groups") and \
                    all(f["name"] != key.group(1) for f in a.get("fields", [])):
                out.append(_set_arg(spec, a["name"], {**a, "fields": a.get("fields", []) + [
                    guess_arg(key.group(1), None, None)]}))
    m = re.search(r"'(Tensor|list|_MgNamespace|Module)' object has no attribute 'param_groups'", msg)
    if m:
        for user in re.findall(r"(?<![\w.])(?:self\.)?(\w+)\s*\.\s*param_groups\b", line):
            if user in args and args[user]["kind"] != "optimizer":
                out.append(_set_arg(spec, user, optimizer_arg(user)))
    if re.search(r"ProcessGroup' object is not (subscriptable|iterable)", msg):
        out += [_set_arg(spec, a["name"], param_groups_arg(a["name"])) for a in args.values()
                if a["kind"] == "group" and PARAM_GROUPS_RE.search(a["name"])]
    return out
