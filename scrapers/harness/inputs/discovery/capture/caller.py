"""A test function that calls a candidate, as a candidate of its own: what the harness renders and runs.

The call-site scan (scrapers/harness/inputs/discovery/callsites.py) keeps, per candidate, the test units that call it
(`callers`: path, class, function). Here such a unit becomes a candidate record with the fields the
renderer and the spec guess read (provenance, entry, kind, params, decorators), parsed from the checkout's
file with ast; nothing is imported or executed here.
"""

from __future__ import annotations

import ast
from typing import Any

# argument kinds as scrapers/records.py names them
_KINDS = (("posonlyargs", "positional"), ("args", "positional"), ("kwonlyargs", "kwonly"))


def _params(fn: ast.FunctionDef) -> list[dict[str, Any]]:
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults: dict[str, ast.expr | None] = dict(zip([p.arg for p in positional][::-1], a.defaults[::-1]))
    defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults)})
    out = []
    for field, kind in _KINDS:
        for p in getattr(a, field):
            d = defaults.get(p.arg)
            out.append(
                {
                    "name": p.arg,
                    "kind": kind,
                    "annotation": ast.unparse(p.annotation) if p.annotation else None,
                    "default": ast.unparse(d) if d is not None else None,
                }
            )
    for p, kind in ((a.vararg, "vararg"), (a.kwarg, "varkw")):
        if p is not None:
            out.append({"name": p.arg, "kind": kind, "annotation": None, "default": None})
    return out


def find_unit(tree: ast.Module, cls: str, function: str) -> ast.FunctionDef | None:
    """The top-level function `function`, or the method `function` of the top-level class `cls`."""
    body = tree.body
    if cls:
        owner = next((c for c in body if isinstance(c, ast.ClassDef) and c.name == cls), None)
        body = owner.body if owner else []
    return next((f for f in body if isinstance(f, ast.FunctionDef) and f.name == function), None)


def caller_candidate(callee: dict[str, Any], caller: dict[str, Any], text: str) -> dict[str, Any] | None:
    """The candidate record of the test unit `caller` ({path, class, function}) of `callee`'s repository,
    whose file holds `text`; None when the unit is not in the file."""
    fn = find_unit(ast.parse(text), caller["class"], caller["function"])
    if fn is None:
        return None
    pv = callee["provenance"]
    entry = f"{caller['class']}.{fn.name}" if caller["class"] else fn.name
    return {
        "id": f"{callee['id']}~{caller['path']}::{entry}",
        "entry": entry,
        "qualname": entry,
        "kind": "method" if caller["class"] else "function",
        "params": _params(fn),
        "decorators": [ast.unparse(d) for d in fn.decorator_list],
        "docstring": ast.get_docstring(fn),
        "unresolved": [],
        "provenance": {
            **pv,
            "path": caller["path"],
            "line_start": fn.lineno,
            "line_end": fn.end_lineno or fn.lineno,
            "url": None,
        },
    }
