"""Parametrized tests: the first case of `@pytest.mark.parametrize` / ColossalAI `@parameterize` as inputs."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

PARAMETRIZE_RE = re.compile(r"(?:^|\.)(?:parametrize|parameterize)\s*\(")
DTYPES = {
    "float32",
    "float",
    "float64",
    "double",
    "float16",
    "half",
    "bfloat16",
    "int8",
    "int16",
    "int32",
    "int64",
    "int",
    "long",
    "uint8",
    "bool",
    "float8_e4m3fn",
    "float8_e5m2",
    "complex64",
}
_NONE = object()


def _lists(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return [_lists(y) for y in x]
    return {k: _lists(v) for k, v in x.items()} if isinstance(x, dict) else x


def _case_value(node: ast.expr) -> Any:
    """A case value that survives the spec's JSON round trip unchanged (tuples become lists; no int keys,
    infinities or Ellipsis); `torch.<dtype>` as ("dtype", name); else _NONE."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return ("dtype", node.attr) if node.attr in DTYPES else _NONE
    try:
        v = _lists(ast.literal_eval(node))
        same = json.loads(json.dumps(v, allow_nan=False)) == v
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _NONE
    return v if same else _NONE


def parametrized(cand: dict[str, Any]) -> dict[str, Any]:
    """Name -> value of the first case of each parametrize decorator of the candidate (the inputs the test
    was written for), where the value is a literal; `indirect=` parametrization (fixtures) is skipped."""
    out: dict[str, Any] = {}
    for d in cand.get("decorators") or []:
        try:
            call = ast.parse(d.strip(), mode="eval").body if PARAMETRIZE_RE.search(d) else None
        except SyntaxError:
            continue
        if (
            not isinstance(call, ast.Call)
            or len(call.args) < 2
            or any(k.arg == "indirect" for k in call.keywords)
            or not isinstance(call.args[1], (ast.List, ast.Tuple))
            or not call.args[1].elts
        ):
            continue
        names = _case_value(call.args[0])
        names = [x.strip() for x in names.split(",")] if isinstance(names, str) else names
        if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
            continue
        first = call.args[1].elts[0]
        if isinstance(first, ast.Call) and getattr(first.func, "attr", "") == "param":  # pytest.param(a, b, id=)
            first = first.args[0] if len(first.args) == 1 else ast.Tuple(first.args)
        vals = [first] if len(names) == 1 else getattr(first, "elts", [])
        for name, v in zip(names, vals):
            val = _case_value(v)
            if val is not _NONE:
                out[name] = val
    return out


def case_arg(name: str, value: Any) -> dict[str, Any]:
    """A spec argument holding a case value."""
    if isinstance(value, tuple):
        return {"name": name, "kind": "dtype", "value": value[1]}
    if isinstance(value, bool):
        return {"name": name, "kind": "bool", "value": value}
    if isinstance(value, int):
        return {"name": name, "kind": "int", "expr": str(value)}
    if isinstance(value, float):
        return {"name": name, "kind": "float", "value": value}
    return {"name": name, "kind": "literal", "value": value}
