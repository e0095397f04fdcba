"""A name-guessed spec argument corrected by the repository's evidence (evidence.py clues).

`decide` picks, per parameter, what the strongest source says (call sites and tests > docstring and shape
comments > body usage); `with_evidence` rewrites the guessed argument accordingly. Structured guesses
(groups, namespaces, modules, optimizers, streams, devices, paths) are kept: evidence only decides among
tensors and scalars, which is where a name guess goes wrong.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from mgbench.scrapers.harness.inputs.discovery.evidence import FP32_NAME_RE, INT_DTYPE_RE, Clue
from mgbench.scrapers.harness.inputs.discovery.name_guess import guess_field
from mgbench.scrapers.harness.inputs.discovery.roles import role_of, role_shape
from mgbench.scrapers.harness.make.specs import optim_arg

# strength of a clue's source (the first word of Clue.source)
STRENGTH = {"call_site": 3, "test": 3, "annotation": 2, "docstring": 2, "shape_comment": 2, "body": 1}
# guessed kinds that evidence may replace (a name guess fell back to them)
REPLACEABLE = frozenset({"tensor", "int", "float", "bool", "const", "literal", "dtype", "fn", "splits", "tensors"})
MAX_NDIM = 5
ROOT_NAME_RE = re.compile(r"(root|src|dst|source|target)(_rank)?$")
ASYNC_RE = re.compile(r"(^|_)async($|_)")
# names of tensors a test may pass a string mock for (`model="model"`): a string there is no evidence
TENSOR_NAME_RE = re.compile(
    r"(^|_)(input|inputs|output|outputs|grad|tensor|tensors|model|weight|bias|x|hidden|states?|logits|buffer|buf|"
    r"data|params?|optimizer)(_|$)"
)
FLOATING = frozenset({"float32", "float16", "bfloat16", "float64"})
# callables by slot: what an attention / projection / activation callable of that arity is
SLOT_FNS = (
    (re.compile(r"attn|attention|sdpa"), 3, "scaled_dot_product_attention"),
    (re.compile(r"proj|linear|matmul|gemm|mm$"), 2, "linear"),
)
# a unary callable slot that models fill with an nn.Linear (runtime kind "linear")
PROJECTION_SLOT = re.compile(r"(^|_)(proj|projection|linear|fc\d*|dense|lm_head|head)$", re.I)
RANK_NAME = (
    (re.compile(r"(^|_)prev"), "(rank+ws-1)%ws"),
    (re.compile(r"(^|_)next"), "(rank+1)%ws"),
    (re.compile(r"(^|_)peer"), "(rank^1)%ws"),
)
# an uneven, rank-consistent split list: element i of rank r is n + (r + i) % ws, symmetric in (r, i), so
# what rank r sends to i (input_split_sizes[i] on r) is what i expects from r (output_split_sizes[r] on i);
# every rank's splits sum to ws*n + ws*(ws-1)/2. Needs the runtime to bind `i` (the element) in "splits".
UNEVEN_SPLITS = "n+(rank+i)%ws"
UNEVEN_TOTAL = "n*ws+ws*(ws-1)//2"  # the first dimension of the tensors such splits cut


@dataclass(frozen=True)
class Verdict:
    """What the evidence decides for one parameter; `source` is the deciding clue's source."""

    kind: str
    source: str
    ndim: int | None = None  # an exact rank
    least: int | None = None  # at least this rank (`x.shape[2]`, a matmul operand): only ever raises a rank
    dtype: str | None = None
    value: Any = None
    arity: int | None = None
    uneven: bool = False
    fields: tuple[str, ...] = ()


def _strength(c: Clue) -> int:
    return STRENGTH.get(c.source.split()[0], 0)


def decide(clues: list[Clue], guessed_kind: str = "") -> Verdict | None:
    """The kind and details the strongest level of clues agrees on (majority), else None."""
    usable = [c for c in clues if c.kind != "splits" or guessed_kind == "splits" or c.value is not None]
    if not usable:
        return None
    top = max(_strength(c) for c in usable)
    level = [c for c in usable if _strength(c) == top]
    kind, _ = Counter(c.kind for c in level).most_common(1)[0]
    if kind == "int" and any(c.kind == "rank" for c in usable):
        kind = "rank"
    chosen = [c for c in level if c.kind == kind] or [c for c in usable if c.kind == kind]
    ndims = [c.ndim for c in usable if c.kind == "tensor" and c.ndim]
    exact = [c.ndim for c in chosen if c.ndim] or ndims
    least = max([c.min_ndim for c in usable if c.min_ndim] or [0])
    ndim = Counter(exact).most_common(1)[0][0] if exact else None
    if ndim and least and ndim < least:
        ndim = least
    dtypes = [c.dtype for c in usable if c.dtype]
    values = [c.value for c in chosen if c.value is not None]
    common = Counter(map(repr, values)).most_common(1)[0][0] if values else None
    return Verdict(
        kind,
        chosen[0].source,
        ndim=min(ndim, MAX_NDIM) if ndim else None,
        least=min(least, MAX_NDIM) if least else None,
        dtype=Counter(dtypes).most_common(1)[0][0] if dtypes else None,
        value=next((x for x in values if repr(x) == common), None),
        arity=next((c.arity for c in chosen if c.arity is not None), None),
        uneven=any(c.uneven for c in chosen),
        fields=tuple(sorted({f for c in chosen for f in c.fields})),
    )


def _ranked(base: dict[str, Any], v: Verdict) -> list[str] | None:
    """The shape the verdict gives a tensor guess: its exact rank, or the guess's rank raised to the least."""
    if v.ndim:
        return role_shape(base, v.ndim)
    if v.least and len(base.get("shape", ["n"])) < v.least:
        return role_shape(base, v.least)
    return None


def _rank_expr(name: str, v: Verdict, base: dict[str, Any]) -> str:
    low = name.lower()
    for pat, expr in RANK_NAME:
        if pat.search(low):
            return expr
    if ROOT_NAME_RE.match(low):  # a root, even where it is a send's destination (`dist.send(t, dst=root)`)
        return base["expr"] if base["kind"] == "int" and base.get("expr") in ("0", "ws-1") else "0"
    if v.value == "peer":
        return "(rank^1)%ws"
    if low == "rank" or v.value == "rank":
        return "rank"
    if isinstance(v.value, int) and not isinstance(v.value, bool):
        return f"{v.value}%ws"
    return base["expr"] if base["kind"] == "int" and base.get("expr") in ("0", "rank", "ws-1") else "0"


def _fn_value(name: str, arity: int | None) -> str:
    low = name.lower()
    for pat, need, fn in SLOT_FNS:
        if pat.search(low) and (arity is None or arity == need):
            return fn
    return "gelu" if arity in (None, 1) else "noop"


def with_evidence(base: dict[str, Any], v: Verdict | None) -> tuple[dict[str, Any], str]:
    """The guessed argument `base` rewritten by verdict `v`; with what changed ('' when nothing)."""
    if v is not None and v.kind == "object" and base["kind"] == "namespace" and not base.get("fields") and v.fields:
        return {**base, "fields": [guess_field(f) for f in v.fields]}, f"namespace fields by {v.source}"
    if v is None or base["kind"] not in REPLACEABLE:
        return base, ""
    name, keep = base["name"], {k: base[k] for k in ("keyword", "replicated") if k in base}
    new: dict[str, Any] | None = None
    if v.kind == "tensor" and base["kind"] in ("tensor", "tensors"):
        new = dict(base)
        shape = _ranked(base, v) if base["kind"] == "tensor" else None
        if shape is not None:
            new["shape"] = shape
        if v.dtype:
            new["dtype"] = v.dtype
    elif v.kind == "tensor" and (base["kind"] != "splits" or v.ndim and STRENGTH.get(v.source.split()[0], 0) >= 2):
        ndim = v.ndim or max(v.least or 0, role_of(name).ndim)
        new = {"name": name, "kind": "tensor", "shape": role_shape({}, ndim), "dtype": v.dtype or "float32"}
    elif v.kind == "bool" and ASYNC_RE.search(name):
        return base, ""  # the harness cannot wait on a caller's handle: an async flag keeps its guess (False)
    elif v.kind == "bool" and base["kind"] in ("tensor", "int", "float", "const", "literal", "bool"):
        value = v.value if isinstance(v.value, bool) else base.get("value", False) if base["kind"] == "bool" else False
        new = {"name": name, "kind": "bool", "value": value}
    elif v.kind == "rank" and base["kind"] in ("tensor", "int", "float"):
        new = {"name": name, "kind": "int", "expr": _rank_expr(name, v, base)}
    elif v.kind == "int" and base["kind"] in ("tensor", "float"):
        small = isinstance(v.value, int) and -1 <= v.value <= 1
        new = {"name": name, "kind": "int", "expr": str(v.value) if small else "n"}
    elif v.kind == "number" and (base["kind"] in ("tensor", "float") or base.get("expr") == "n" and v.value == "int"):
        # a number the body puts into a tensor (a statistic that is reduced): drawn per rank and seed, or a
        # collective over it sees the same value everywhere; into an integer tensor, an int that differs per rank
        new = (
            {"name": name, "kind": "int", "expr": "n+rank"}
            if v.value == "int"
            else {"name": name, "kind": "float", "draw": True}
        )
    elif v.kind == "float" and base["kind"] == "tensor":
        new = {"name": name, "kind": "float", "value": float(v.value) if v.value is not None else 0.5}
    elif (
        v.kind == "mode"
        and base["kind"] in ("tensor", "literal")
        or (v.kind == "str" and base["kind"] in ("tensor", "literal") and not TENSOR_NAME_RE.search(name))
    ):
        value = v.value if isinstance(v.value, str) else ("GLOBAL" if v.kind == "mode" else name)
        new = {"name": name, "kind": "const", "value": value}
    elif v.kind == "dtype" and base["kind"] in ("tensor", "dtype"):
        new = {"name": name, "kind": "dtype", "value": v.value or base.get("value", "float32")}
    elif (
        v.kind == "callable"
        and base["kind"] in ("tensor", "fn")
        and PROJECTION_SLOT.search(name)
        and v.arity in (None, 1)
    ):  # `up_proj(x)`: the module a model passes there, not a function
        new = {"name": name, "kind": "linear", "shape": ["n", "n"], "dtype": "float32", "replicated": True}
    elif v.kind == "callable" and base["kind"] in ("tensor", "fn", "float", "int", "bool"):
        new = {"name": name, "kind": "fn", "value": _fn_value(name, v.arity)}
    elif v.kind == "splits" and base["kind"] == "splits" and v.uneven:
        new = {"name": name, "kind": "splits", "expr": UNEVEN_SPLITS}
    elif v.kind == "object" and base["kind"] == "tensor" and "param_groups" in v.fields:
        new = optim_arg(name, "optimizer")  # `optimizer.param_groups`: a real optimizer (make/runtime/standin_optim.py)
    elif v.kind == "object" and base["kind"] == "tensor" and v.fields:
        new = {"name": name, "kind": "namespace", "fields": [guess_field(f) for f in v.fields]}
    if new is None:
        return base, ""
    new = {**new, **({k: x for k, x in keep.items() if k == "keyword" or new["kind"] in ("tensor", "tensors")})}
    return (new, f"{base['kind']}->{new['kind']} by {v.source}") if new != base else (base, "")


def integer_numbers(args: list[dict[str, Any]]) -> list[str]:
    """A drawn number where the spec's dtype argument is an integer dtype (`all_gather_item(item,
    dtype=torch.int32)`): an int per rank, since a draw below 1 would be 0 on every rank. Returns the names."""
    if not any(a["kind"] == "dtype" and INT_DTYPE_RE.match(str(a.get("value", ""))) for a in args):
        return []
    out = []
    for a in args:
        if a["kind"] == "float" and a.get("draw"):
            a.pop("draw")
            a.update(kind="int", expr="n+rank")
            out.append(a["name"])
    return out


def split_buffers(args: list[dict[str, Any]]) -> list[str]:
    """With uneven splits (UNEVEN_SPLITS) in the spec, the tensors they cut (first dimension n or n*ws, the
    even total) take the uneven total. Returns the names changed."""
    if not any(a["kind"] == "splits" and a.get("expr") == UNEVEN_SPLITS for a in args):
        return []
    out = []
    for a in args:
        if a["kind"] == "tensor" and (a.get("shape") or ["n"])[0] in ("n", "n*ws"):
            a["shape"] = [UNEVEN_TOTAL] + list(a.get("shape", ["n"]))[1:]
            out.append(a["name"])
    return out


def bf16(args: list[dict[str, Any]], touched: set[str]) -> list[str]:
    """Model code: floating tensors become bfloat16 (not statistics, losses, masks, grads or an argument
    whose dtype a call site gave). Returns the names changed."""
    out = []
    for a in args:
        if (
            a["kind"] in ("tensor", "tensors", "linear")
            and a.get("dtype", "float32") == "float32"
            and a["name"] not in touched
        ):
            if not FP32_NAME_RE.search(a["name"]):
                a["dtype"] = "bfloat16"
                out.append(a["name"])
    return out


def dtype_is_floating(a: dict[str, Any]) -> bool:
    return a.get("dtype", "float32") in FLOATING
