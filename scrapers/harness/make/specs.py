"""Harness spec kinds: one schema (kind -> the keys an argument of that kind may and must carry) and a
constructor per kind that the search's rules use.

A spec is `{"entry", "kind", "args", "attrs", "globals"?, ...}`; each argument, attribute, module global
and namespace field is a dict `{"name", "kind", ...}` that the task-side runtime draws per rank
(runtime/__init__.py `_mg_value`, runtime/standin_optim.py for the optimizer kinds; groups in `_mg_group`). Specs are
rendered with sorted keys and hashed, so constructors only decide which keys exist, not their order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

COMMON = frozenset({"name", "kind", "keyword", "replicated"})  # any argument: its name, keyword-passed


@dataclass(frozen=True)
class Kind:
    """One argument kind: the keys it must carry (besides name and kind) and those it may carry."""

    required: frozenset[str] = frozenset()
    optional: frozenset[str] = frozenset()
    what: str = ""


def _k(required: str = "", optional: str = "", what: str = "") -> Kind:
    return Kind(frozenset(required.split()), frozenset(optional.split()), what)


SCHEMA: dict[str, Kind] = {
    "tensor": _k(
        "",
        "shape dtype high fields grads count draw fill",
        "a tensor drawn per rank (fields: its attributes; draw: one of TENSOR_DRAWS; fill: every element this "
        "integer expression)",
    ),
    "tensors": _k("", "shape dtype high count grads fields", "a list of `count` tensors (grads: parameters)"),
    "module": _k("", "shape dtype count chunks", "an nn.Module of `count` parameters with gradients (chunks: a list)"),
    "linear": _k("", "shape dtype", "an nn.Linear from shape[1] to shape[0] features (a projection slot)"),
    "int": _k("", "expr", "an integer expression of n, ws, rank"),
    "splits": _k("", "expr", "ws integers (split sizes)"),
    "float": _k("", "value draw", "a float constant, or drawn per rank and seed"),
    "bool": _k("", "value", "a flag"),
    "none": _k("", "value", "None"),
    "const": _k("", "value", "a JSON value"),
    "member": _k("value", "", "a module-level name of the task, dotted (an enum member: `Mode.REDUCE_SCATTER`)"),
    "literal": _k("", "value", "a parametrized test's literal"),
    "dtype": _k("", "value", "a torch dtype by name"),
    "device": _k("", "value", "the rank's device (value 'str': its name)"),
    "fn": _k("", "value", "torch.nn.functional.<value>, or 'noop'"),
    "path": _k("", "value", "a scratch path ('pathlib' or 'str')"),
    "stream": _k("", "", "the rank's current CUDA stream (a stand-in on CPU)"),
    "event": _k("", "", "a CUDA event (a stand-in on CPU)"),
    "ranks": _k("", "", "the global ranks of the world"),
    "reduce_op": _k("", "value", "a dist.ReduceOp by name"),
    "group": _k("", "value", "a process group: world, list, state (parallel-state object), collection"),
    "namespace": _k("", "fields dict", "an object (dict: a dict) with the given fields"),
    "optimizer": _k("", "shape dtype count fields", "a real optimizer over parameters with gradients"),
    "param_groups": _k("", "shape dtype count fields", "an optimizer's parameter groups"),
    "optim_state": _k("", "", "an optimizer's per-parameter state"),
}
# how a tensor's values are drawn besides the default (floats: standard normal; integers: uniform below high)
TENSOR_DRAWS: dict[str, str] = {
    "distinct": "integer rows (last dim) of distinct values below high: top-k indices",
    "positive": "floats uniform in [0.5, 1.5): a scale such as a reciprocal standard deviation",
}
OPTIM_PARAM_KINDS = ("optimizer", "param_groups")  # draw parameters with gradients (runtime/standin_optim.py)
OPTIM_KINDS = OPTIM_PARAM_KINDS + ("optim_state",)
PARAM_GROUPS_RE = re.compile(r"(^|_)param_groups$")


class SpecError(ValueError):
    """An argument that the schema does not allow."""


def problems(a: dict[str, Any]) -> list[str]:
    """What is wrong with one argument (its fields included) against SCHEMA; [] when it conforms."""
    kind = SCHEMA.get(a.get("kind", ""))
    if kind is None:
        return [f"{a.get('name')!r}: unknown kind {a.get('kind')!r}"]
    keys = set(a)
    out = [f"{a['name']!r} ({a['kind']}): missing {k!r}" for k in sorted(kind.required - keys)]
    out += [
        f"{a['name']!r} ({a['kind']}): unexpected {k!r}" for k in sorted(keys - COMMON - kind.required - kind.optional)
    ]
    if a.get("kind") == "tensor" and "draw" in a and a["draw"] not in TENSOR_DRAWS:
        out.append(f"{a['name']!r} (tensor): draw {a['draw']!r} is not one of {', '.join(TENSOR_DRAWS)}")
    for f in a.get("fields", []):
        out += problems(f)
    return out


def spec_problems(spec: dict[str, Any]) -> list[str]:
    """Schema problems of every argument, attribute and module global of a spec."""
    return [p for k in ("args", "attrs", "globals") for a in spec.get(k, []) for p in problems(a)]


def arg(name: str, kind: str, **keys: Any) -> dict[str, Any]:
    """An argument of `kind` with `keys`, checked against SCHEMA."""
    a = {"name": name, "kind": kind, **keys}
    bad = problems({**a, "fields": []}) if "fields" in a else problems(a)
    if bad:
        raise SpecError("; ".join(bad))
    return a


def tensor(name: str, shape: list[str], dtype: str = "float32", **keys: Any) -> dict[str, Any]:
    return arg(name, "tensor", shape=shape, dtype=dtype, **keys)


def integer(name: str, expr: str = "n") -> dict[str, Any]:
    return arg(name, "int", expr=expr)


def real(name: str, value: float) -> dict[str, Any]:
    return arg(name, "float", value=value)


def flag(name: str, value: bool) -> dict[str, Any]:
    return arg(name, "bool", value=value)


def splits(name: str, expr: str = "n") -> dict[str, Any]:
    return arg(name, "splits", expr=expr)


def const(name: str, value: Any) -> dict[str, Any]:
    return arg(name, "const", value=value)


def fn(name: str, value: str = "gelu") -> dict[str, Any]:
    """A callable: a torch.nn.functional function by name, or "noop" (accepts anything)."""
    return arg(name, "fn", value=value)


def path(name: str, value: str = "str") -> dict[str, Any]:
    return arg(name, "path", value=value)


def device(name: str) -> dict[str, Any]:
    return arg(name, "device")


def dtype(name: str, value: str = "float32") -> dict[str, Any]:
    return arg(name, "dtype", value=value)


def group(name: str, value: str = "world") -> dict[str, Any]:
    return arg(name, "group", value=value)


def namespace(name: str, fields: list[dict[str, Any]], as_dict: bool = False) -> dict[str, Any]:
    """An object with attributes `fields` (with `as_dict`, a dict with those keys)."""
    return arg(name, "namespace", fields=fields, **({"dict": True} if as_dict else {}))


def module(name: str, replicated: bool = False, chunks: bool = False) -> dict[str, Any]:
    """A model of per-rank (or replicated) parameters; with `chunks`, a list of two models."""
    return arg(
        name,
        "module",
        shape=["n"],
        count="2",
        dtype="float32",
        **({"replicated": True} if replicated else {}),
        **({"chunks": 2} if chunks else {}),
    )


def optim_arg(name: str, kind: str = "optimizer") -> dict[str, Any]:
    """A real optimizer ("optimizer") or its one parameter group (`[{"params": [...], "lr": ..., "betas":
    ...}]`, "param_groups") over `ws` 2-D parameters with gradients."""
    return arg(name, kind, shape=["n", "n"], count="ws", dtype="float32")


def optim_state(name: str = "state") -> dict[str, Any]:
    return arg(name, "optim_state")
