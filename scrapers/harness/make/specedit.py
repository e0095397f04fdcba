"""Edits of a harness spec: find its arguments (fields of synthesized objects included) and replace one."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any


def _all_args(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Arguments, attributes and the fields of synthesized namespaces (depth first)."""
    out, todo = [], list(spec["args"] + spec["attrs"] + spec.get("globals", []))
    while todo:
        a = todo.pop(0)
        out.append(a)
        todo[:0] = a.get("fields", [])
    return out


def uses_kind(spec: dict[str, Any], kinds: tuple[str, ...]) -> bool:
    """Whether the spec draws an argument, attribute, global or field of one of `kinds`."""
    return any(a["kind"] in kinds for a in _all_args(spec))


TENSOR_ARG_KINDS = ("tensor", "tensors", "module", "linear")  # spec kinds drawn as tensors (or holding them)


def _tensor_args(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in _all_args(spec) if a["kind"] in TENSOR_ARG_KINDS]


def suspects(spec: dict[str, Any], line: str) -> list[dict[str, Any]]:
    """Arguments named on the failing line (all tensor arguments when none is)."""
    named = [a for a in _all_args(spec) if re.search(rf"\b{re.escape(a['name'])}\b", line)]
    return named or _tensor_args(spec)


def _with(spec: dict[str, Any], fn: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    s = copy.deepcopy(spec)
    fn(s)
    return s


def _set_arg(spec: dict[str, Any], name: str, new: dict[str, Any]) -> dict[str, Any]:
    def go(s: dict[str, Any]) -> None:
        lists = [s["args"], s["attrs"], s.get("globals", [])]
        for lst in lists + [a["fields"] for a in _all_args(s) if "fields" in a]:
            for i, a in enumerate(lst):
                if a["name"] == name:
                    lst[i] = {**new, **({"keyword": True} if a.get("keyword") else {})}

    return _with(spec, go)


def _shape_all(spec: dict[str, Any], shape: list[str], only: set[str] | None = None) -> dict[str, Any]:
    def go(s: dict[str, Any]) -> None:
        for a in _tensor_args(s):
            if only is None or a["name"] in only:
                a["shape"] = list(shape)

    return _with(spec, go)


def loop_aliases(text: str) -> dict[str, str]:
    """Loop variables over a name in the candidate's code (`for chunk in model`, `for i, chunk in
    enumerate(model)`): variable -> the iterated name."""
    out = {}
    for var, src in re.findall(r"\bfor\s+(?:\w+\s*,\s*)?(\w+)\s+in\s+(?:enumerate\(\s*)?(\w+)\s*[:)]", text):
        out.setdefault(var, src)
    return out


_PY_TYPES = {"int": int, "float": float, "NoneType": type(None), "list": list, "tuple": tuple, "bool": bool}
_KINDS_OF = {
    "int": ("int",),
    "float": ("float",),
    "NoneType": ("none",),
    "bool": ("bool",),
    "list": ("tensors", "splits", "ranks"),
}


def of_type(args: list[dict[str, Any]], type_name: str) -> list[dict[str, Any]]:
    """The arguments drawn as a value of Python type `type_name` (an error names the type it got)."""
    want = _PY_TYPES[type_name]
    return [
        a
        for a in args
        if a["kind"] in _KINDS_OF.get(type_name, ()) or a["kind"] == "const" and type(a.get("value")) is want
    ]
