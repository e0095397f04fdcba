"""Rules for process groups guessed where something else is used, and None left where an object is read."""

from __future__ import annotations

import re

from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.inputs.discovery.name_guess import guess_field, param_named
from mgbench.scrapers.harness.inputs.failure import Failure
from mgbench.scrapers.harness.inputs.rules.base import Rule, Spec
from mgbench.scrapers.harness.make import specs
from mgbench.scrapers.harness.make.specedit import _all_args, _set_arg, _with

STATE_GETTER_RE = re.compile(r"_?get_\w*(group|groups|world_size|rank|size)$")  # `mpu.get_model_parallel_group`
AS_LIST = ("not subscriptable", "not iterable", "has no len", "unpack non-iterable")


def _none_global(cand: Candidate, name: str) -> bool:
    """`name = None` at module level in the candidate's code (`g_mpu = None`, set by an init function)."""
    return bool(re.search(rf"^{re.escape(name)}\s*(:[^=\n]*)?=\s*None\b", cand.text, re.M))


def group_misuse(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """A guessed process group used as something else: an object with attributes (`pg.tp_world_size`), a list
    of groups (`groups[0]`, `for g in groups`), a size (`group <= 1`). Also `'NoneType' object has no
    attribute X` on a parameter left to its default None, or on a module global set to None (`g_mpu = None`):
    pass a parallel-state object when X is a group/size/rank getter, else an object with field X."""
    msg, line, out = f.msg, f.line, []
    attr = re.search(r"has no attribute '(\w+)'", msg)
    if "NoneType" in msg and attr:
        have = {a["name"] for a in _all_args(spec)}
        state = bool(STATE_GETTER_RE.match(attr.group(1)))
        for user in re.findall(rf"(?<![\w.])(\w+)\s*\.\s*{attr.group(1)}\b", line):
            p = param_named(cand.record, user)
            new = specs.group(user, "state") if state else specs.namespace(user, [guess_field(attr.group(1))])
            if p and user not in have and p.get("default") is not None:
                out.append(_with(spec, lambda s, new=new: s["args"].append({**new, "keyword": True})))
            elif not p and user not in have and _none_global(cand, user):
                out.append(_with(spec, lambda s, new=new: s.setdefault("globals", []).append(new)))
    if "ProcessGroup" not in msg:
        return out
    groups = [a for a in _all_args(spec) if a["kind"] == "group" and a.get("value", "world") == "world"]
    named = [a for a in groups if re.search(rf"\b{re.escape(a['name'])}\b", line)] or groups
    for a in named:
        if attr:
            new = specs.namespace(a["name"], [guess_field(attr.group(1))])
        elif any(w in msg for w in AS_LIST):
            new = specs.group(a["name"], "list")
        elif "not supported between" in msg or "'int'" in msg:
            new = specs.integer(a["name"], "ws")
        else:
            continue
        out.append(_set_arg(spec, a["name"], new))
    return out


RULES = [
    Rule("group_misuse", 80, group_misuse),
]
