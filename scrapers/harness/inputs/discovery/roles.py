"""Tensor ranks, integer dtypes and dimension indices by a parameter's role in production code: what a
name guess gives when the repository itself says nothing about a tensor's shape (evidence first, then
name guesses).

A harness used to start every tensor as `[n]`, so a tensor-parallel layer got a GEMV, an attention
all-to-all a 1-D vector with `scatter_dim == gather_dim == 0`, and a loss a vector. The tables below say
what real callers pass, by role; evidence (call sites, docstrings, shape comments, body usage:
evidence.py) still wins over them, and the error-driven search still corrects them.

- ROLES: a tensor's rank (and integer dtype) by its name, first match wins; DEFAULT for the rest.
- NORM_CONTEXT: in normalization code a bare `weight` is the per-channel scale (1-D), elsewhere a matrix.
- RELATIONS: ranks that follow another argument's (labels are logits without the class dimension; Adam's
  moments have their parameter's shape).
- DIM_INDEX_ROLES: integer parameters that index a tensor's dimensions; several of them take distinct
  indices, and the tensor they index gets the rank those indices need.

Only the standard library is used (the spec is data; nothing runs here).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Role:
    """A tensor role: names matching `pattern` are passed as rank-`ndim` tensors (`dtype` for integer
    roles, None: the guess's floating dtype) laid out as `layout` in production code."""

    name: str
    pattern: re.Pattern[str]
    ndim: int
    layout: str
    dtype: str | None = None


def _role(name: str, pattern: str, ndim: int, layout: str, dtype: str | None = None) -> Role:
    return Role(name, re.compile(pattern, re.I), ndim, layout, dtype)


ROLES: tuple[Role, ...] = (
    _role("explicit_rank", r"(^|_)[0-5]d$", -1, "the rank the name states (`rs_input_1d`)"),
    _role("attention_qkv", r"^(q|k|v|xq|xk|xv|query|key|value)(_|$)", 4, "[b, s, heads, head_dim]"),
    _role("vocab_logits", r"vocab_parallel_logits|logits_parallel|parallel_logits", 3, "[s, b, vocab/tp] (Megatron)"),
    _role("scalar_loss", r"(^|_)loss$", 0, "a reduced loss (0-D)"),
    _role("token_ids", r"(^|_)(ids|idx|indices|index|labels?|targets?|positions|token_ids)$", 1, "[tokens]", "int64"),
    _role("flat_buffer", r"(^|_)(flat|bucket|buffer|buf|packed|shard)(_|$)", 1, "a flattened buffer or shard"),
    _role(
        "per_channel",
        r"(^|_)(bias|b\d+|gamma|beta|amax|amax_history|history|scales?|inv_freq)(_|$)",
        1,
        "[channels]: a bias, a norm's scale, an fp8 amax history",
    ),
    _role(
        "per_token",
        r"(^|_)(scores?|logprobs?|log_probs|advantages?|rewards?|returns|lengths?|seqlens?|cu_seqlens|losses)(_|$)",
        1,
        "[tokens]: one value per token or sequence",
    ),
)
DEFAULT = Role("activation", re.compile(""), 2, "[tokens, hidden]: activations, gradients, weight matrices")
NORM_CONTEXT = re.compile(r"norm", re.I)  # in the entry's name or file: a bare `weight` is a per-channel scale
NORM_WEIGHT = re.compile(r"(^|_)weight$", re.I)


def role_of(name: str, context: str = "") -> Role:
    """The role of a tensor parameter `name` (`context`: the entry's qualified name and file path)."""
    if NORM_WEIGHT.search(name) and NORM_CONTEXT.search(context):
        return Role("norm_weight", NORM_WEIGHT, 1, "[hidden]: a norm's per-channel scale")
    for role in ROLES:
        m = role.pattern.search(name)
        if m:
            return Role(role.name, role.pattern, int(m.group(0)[-2]), role.layout) if role.ndim < 0 else role
    return DEFAULT


def role_shape(base: dict[str, Any], ndim: int) -> list[str]:
    """A rank-`ndim` shape keeping the guess's first dimension (`n*ws` for an output) and n elsewhere."""
    first = (base.get("shape") or ["n"])[0]
    return [] if ndim == 0 else [first] + ["n"] * (ndim - 1)


def with_role(a: dict[str, Any], context: str = "") -> tuple[dict[str, Any], str]:
    """A name-guessed tensor argument (or list of tensors) with its role's rank and dtype; what changed."""
    if a["kind"] not in ("tensor", "tensors"):
        return a, ""
    role = role_of(a["name"], context)
    new = {**a, "shape": role_shape(a, role.ndim)}
    if role.dtype and a["kind"] == "tensor":
        new["dtype"] = role.dtype
    if new == a:
        return a, ""
    return new, "" if role is DEFAULT else f"rank {role.ndim} by role {role.name}"  # the fallback is no news


# ---- relations between arguments ----------------------------------------------------------------------

LABELS = re.compile(r"(^|_)(labels?|targets?)$", re.I)
LOGITS = re.compile(r"logits", re.I)
MOMENT = re.compile(r"^exp_avg(_sq)?(_(?P<of>\w+))?$", re.I)
PARAM_LIKE = re.compile(r"(^|_)(grad|grads|param|params|master|shard|weight)(_|$)", re.I)


def _rank(a: dict[str, Any]) -> int:
    return len(a.get("shape", ["n"]))


def _follow(a: dict[str, Any], other: dict[str, Any], ndim: int) -> bool:
    if a["kind"] != "tensor" or _rank(a) == ndim:
        return False
    a["shape"] = role_shape(a, ndim) if ndim <= 1 else role_shape(other, ndim)
    return True


def related_ranks(args: list[dict[str, Any]], fixed: set[str]) -> dict[str, str]:
    """Ranks that follow other arguments' (RELATIONS), in place; not for the names in `fixed` (their rank
    came from evidence). Returns name -> what changed."""
    by_name = {a["name"]: a for a in args if a["kind"] in ("tensor", "tensors")}
    changed: dict[str, str] = {}
    logits = next((a for a in by_name.values() if LOGITS.search(a["name"]) and a["kind"] == "tensor"), None)
    for a in by_name.values():
        if a["name"] in fixed:
            continue
        if logits is not None and LABELS.search(a["name"]) and _follow(a, logits, max(_rank(logits) - 1, 1)):
            changed[a["name"]] = f"rank {_rank(a)} by relation labels_of_logits ({logits['name']})"
            continue
        m = MOMENT.match(a["name"])
        if not m:
            continue
        of = by_name.get(m.group("of") or "") or next(
            (b for b in by_name.values() if b is not a and PARAM_LIKE.search(b["name"])), None
        )
        if of is not None and _follow(a, of, _rank(of)):
            changed[a["name"]] = f"rank {_rank(a)} by relation moment_of_param ({of['name']})"
    return changed


# Each relation in one line, for docs and tests: the pattern of the following argument and what it follows.
RELATIONS = (
    ("labels_of_logits", LABELS.pattern, "a logits argument: its rank less the class dimension"),
    ("moment_of_param", MOMENT.pattern, "exp_avg_<p> follows <p>; a bare exp_avg the first grad/param/shard"),
)

# ---- dimension indices ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DimRole:
    """Integer parameters that index dimensions: `names` (all present in one signature) take `values`, and
    the tensors they index need rank `ndim` (0: one more than the largest index)."""

    name: str
    names: tuple[str, ...]
    values: tuple[int, ...]
    ndim: int
    layout: str


DIM_INDEX_ROLES: tuple[DimRole, ...] = (
    DimRole("attention_layout", ("seq_dim", "head_dim"), (1, 2), 4, "[b, s, heads, head_dim] (Ulysses)"),
    DimRole("scatter_gather", ("scatter_dim", "gather_dim"), (0, 1), 0, "split one dimension, join another"),
    DimRole("scatter_gather_idx", ("scatter_idx", "gather_idx"), (0, 1), 0, "split one dimension, join another"),
)


def dim_indices(args: list[dict[str, Any]], fixed: set[str]) -> dict[str, str]:
    """Dimension-index parameters (DIM_INDEX_ROLES) given their values, and the tensors of the call the rank
    those indices need (not below what they have, not the names in `fixed`), in place."""
    by_name = {a["name"]: a for a in args}
    changed: dict[str, str] = {}
    for role in DIM_INDEX_ROLES:
        ints = [by_name.get(n) for n in role.names]
        if not all(a is not None and a["kind"] == "int" and a.get("expr") == "0" for a in ints):
            continue
        for a, v in zip(ints, role.values):
            if a is not None and a["expr"] != str(v):
                a["expr"] = str(v)
                changed[a["name"]] = f"dimension index {v} by {role.name}"
        need = role.ndim or max(role.values) + 1
        for a in args:
            if a["kind"] == "tensor" and a["name"] not in fixed and _rank(a) < need:
                a["shape"] = role_shape(a, need)
                changed[a["name"]] = f"rank {need} by {role.name}"
    return changed
