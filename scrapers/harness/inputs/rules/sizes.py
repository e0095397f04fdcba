"""Rules for shapes and sizes (the size arithmetic lives in inputs/sizefix.py)."""

from __future__ import annotations

import re

from mgbench.scrapers.harness.inputs import sizefix as size_math
from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.inputs.failure import Failure
from mgbench.scrapers.harness.inputs.rules.base import Rule, Spec, Trigger
from mgbench.scrapers.harness.inputs.rules.containers import PER_RANK_RE
from mgbench.scrapers.harness.make.specedit import _all_args, _set_arg, _shape_all, _tensor_args, suspects

SHAPE_WORDS = (
    "size of tensor",
    "shapes cannot be multiplied",
    "dimension out of range",
    "too many indices",
    "not enough values to unpack",
    "view size",
    "invalid for input of size",
    "shape",
    "must match",
    "mismatch",
    "expected size",
    "same size",
    "same number of elements",
    "split_with_sizes",
    "split sizes",
    "divisible",
    "chunk",
    "must be equal",
    "out of bounds",
    "index",
    "mat1",
    "mat2",
    "but got",
    "expected",
    "assert",
)
SHAPE_TYPES = frozenset({"AssertionError", "IndexError", "ValueError", "RuntimeError"})
GLOBAL_SHAPES = (
    ["n"],
    ["n", "n"],
    ["n*ws", "n"],
    ["n", "n*ws"],
    ["ws", "n"],
    ["n", "n", "n"],
    ["n*ws"],
    ["n*ws", "n", "n"],
    ["n", "n", "n", "n"],
)
WORLD_WORDS = (
    "world_size times",
    "output tensor size",
    "tensor size must",
    "output tensor",
    "input tensor",
    "split",
    "divisible",
)


def grad_shape(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """An autograd Function's backward returned a gradient of another shape: the input takes it."""
    return size_math.grad_shape_fixes(spec, f.msg, f.ws)


def slot(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`out[rank] = x` with too few dimensions in `out`: one slot of x's shape per rank."""
    return size_math.slot_fixes(spec, f.msg, f.line)


def per_rank_count(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """A count guessed as n where one entry per rank is expected (ranks stay: "0" is a rank, not a count)."""
    out = []
    for a in _all_args(spec):
        if a["kind"] == "int" and a.get("expr") not in ("ws", "0"):
            out.append(_set_arg(spec, a["name"], {**a, "expr": "ws"}))
        elif a["kind"] == "tensors" and a.get("count", "ws") != "ws":
            out.append(_set_arg(spec, a["name"], {**a, "count": "ws"}))
    return out


def world_shapes(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """A collective's size rule (`world_size times`, divisible): each tensor's first dimension n*ws, n,
    n*ws*ws."""
    return [
        _shape_all(spec, shp, {a["name"]})
        for a in _tensor_args(spec)
        for shp in (["n*ws"] + a["shape"][1:], ["n"] + a["shape"][1:], ["n*ws*ws"] + a["shape"][1:])
        if shp != a["shape"]
    ]


def unpack(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`b, s, h = x.shape` on a tensor of another number of dimensions: exactly as many."""
    return size_math.unpack_fixes(spec, f.msg, f.line)


def ndim(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """Too few dimensions (`x.size(2)`, `dimension out of range`): the ones the line reads."""
    return size_math.ndim_fixes(spec, f.msg, f.line, suspects(spec, f.line))


def size_conflict(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """Two sizes that should agree (`mat1 and mat2`, `size of tensor a`): one takes the other."""
    return size_math.size_fixes(spec, f.msg, suspects(spec, f.line), f.ws, f.line)


def _shape_failure(spec: Spec, f: Failure, cand: Candidate) -> bool:
    # a flag, not a shape ("boolean value of tensor" is proposed by values.flag)
    return (any(w in f.low for w in SHAPE_WORDS) or f.type in SHAPE_TYPES) and "boolean value of tensor" not in f.low


def generic_shapes(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """The common global shapes for each suspect tensor, then for all tensors at once; ints set to 1."""
    out = [
        _shape_all(spec, shp, {a["name"]})
        for a in suspects(spec, f.line)
        if a["kind"] in ("tensor", "tensors")
        for shp in GLOBAL_SHAPES
        if shp != a["shape"]
    ]
    out += [_shape_all(spec, shp) for shp in GLOBAL_SHAPES]
    return out + [
        _set_arg(spec, a["name"], {**a, "expr": "1"})
        for a in spec["args"]
        if a["kind"] == "int" and a["expr"] not in ("0", "1")
    ]


RULES = [
    Rule("grad_shape", 10, grad_shape),
    Rule("slot", 20, slot),
    Rule(
        "per_rank_count",
        190,
        per_rank_count,
        Trigger(when=lambda spec, f, cand: bool(re.search(PER_RANK_RE, f.low))),
    ),
    Rule("world_shapes", 360, world_shapes, Trigger(words=WORLD_WORDS)),
    Rule("unpack", 370, unpack),
    Rule("ndim", 380, ndim),
    Rule("size_conflict", 390, size_conflict),
    Rule("generic_shapes", 400, generic_shapes, Trigger(when=_shape_failure)),
]
