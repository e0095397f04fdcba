"""Shape proposals from the sizes a failure names: `mat1 and mat2 shapes cannot be multiplied (1x4 and 8x8)`,
`The size of tensor a (16) must match the size of tensor b (4)`, `shape '[16]' is invalid for input of size 4`.
A suspect tensor dimension that has one of two conflicting sizes gets an expression for the other."""

from __future__ import annotations

import math
import re
from typing import Any

from mgbench.scrapers.harness.make.render import SMOKE_N
from mgbench.scrapers.harness.make.runtime import _mg_eval
from mgbench.scrapers.harness.make.specedit import _all_args, _shape_all, _tensor_args

SEARCH_WS = 2  # the world size of the search's runs (the sizes in its errors)
EXPRS = ("n", "n*ws", "ws", "n//ws", "1", "n*n", "n*ws*ws", "n*n*ws")  # most natural first

MATMUL_PAIR = r"cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)"  # mat1's columns vs mat2's rows
SIZE_PAIRS = (
    r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)",
    r"expected tensor \[(\d+)\] and src \[(\d+)\]",
    r"Check failed: .*\((\d+) vs\. (\d+)\)",
)
SHAPE_PAIR = r"expected \(([\d, ]*)\), got \(([\d, ]*)\)"  # gloo: whole shapes
VIEW = r"shape '\[([\d, -]*)\]' is invalid for input of size (\d+)"


def expr_for(value: int, ws: int = SEARCH_WS) -> str | None:
    """The most natural shape expression whose smoke-size value at world size `ws` is `value`."""
    return next((e for e in EXPRS if _mg_eval(e, SMOKE_N, ws, 0) == value), None)


def _dims(a: dict[str, Any], ws: int = SEARCH_WS) -> list[int]:
    return [_mg_eval(d, SMOKE_N, ws, 0) for d in a.get("shape", ["n"])]


def _conflicts(msg: str) -> list[tuple[int, int]]:
    """Pairs of sizes that should have been equal."""
    m = re.search(MATMUL_PAIR, msg)
    out = [(int(m.group(2)), int(m.group(3)))] if m else []
    out += [(int(m.group(1)), int(m.group(2))) for m in (re.search(p, msg) for p in SIZE_PAIRS) if m]
    m = re.search(SHAPE_PAIR, msg)
    if m:
        want, got = [[int(x) for x in g.split(",") if x.strip()] for g in m.groups()]
        out += [(w, g) for w, g in zip(want, got) if w != g]
    return out


MATMUL = r"matmul|\bmm\(|\bbmm\(|addmm|linear|einsum|\s@\s"


def size_fixes(
    spec: dict[str, Any], msg: str, suspects: list[dict[str, Any]], ws: int = SEARCH_WS, line: str = ""
) -> list[dict[str, Any]]:
    """Specs where one suspect tensor dimension takes the size it conflicted with (in a run at world size
    `ws`; a 1-D operand of a matrix product on `line` first as a matrix); a tensor viewed into an impossible
    shape gets the input's element count."""
    out: list[dict[str, Any]] = []
    matrix = bool(re.search(MATMUL, line))
    tensors = [a for a in suspects if a["kind"] in ("tensor", "tensors")]
    for x, y in _conflicts(msg):
        for a in tensors:
            for i, v in enumerate(_dims(a, ws)):
                e = expr_for(y if v == x else x, ws) if v in (x, y) else None
                if e is not None:
                    shape = a["shape"][:i] + [e] + a["shape"][i + 1 :]
                    if matrix and len(shape) == 1:  # a GEMM operand, not a dot product
                        out.append(_shape_all(spec, shape + ["n"], {a["name"]}))
                    out.append(_shape_all(spec, shape, {a["name"]}))
    m = re.search(VIEW, msg)
    if m:
        target = [int(x) for x in m.group(1).split(",") if x.strip()]
        size, e = int(m.group(2)), expr_for(int(m.group(2)), ws)
        for a in tensors:
            if e is not None and _dims(a, ws) == target:
                out.append(_shape_all(spec, [e], {a["name"]}))
            elif math.prod(_dims(a, ws)) == size and all(t > 0 for t in target):
                shape = [expr_for(t, ws) for t in target]
                if None not in shape:
                    out.append(_shape_all(spec, shape, {a["name"]}))  # type: ignore[arg-type]
    return out


DIM_USE = r"(\w+)\s*\.\s*(?:shape\s*\[\s*(-?\d+)\s*\]|size\s*\(\s*(?:dim\s*=\s*)?(-?\d+)\s*\))"
DIM_ERRORS = ("tuple index out of range", "dimension out of range", "too many indices for tensor")


def ndim_fixes(spec: dict[str, Any], msg: str, line: str, suspects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A tensor with too few dimensions (`A.shape[-1] == B.shape[-2]`, `x.size(2)`, `x[:, 0]`): every suspect
    the failing line indexes gets the dimensions it reads, all in one spec (then each alone)."""
    low = msg.lower()
    if not any(w in low for w in DIM_ERRORS):
        return []
    need: dict[str, int] = {}
    for name, a, b in re.findall(DIM_USE, line):
        k = int(a or b)
        need[name] = max(need.get(name, 0), k + 1 if k >= 0 else -k)
    m = re.search(r"but got (-?\d+)|tensor of dimension (\d+)", low)
    if m:  # `Dimension out of range (... but got 1)`, `x[:, 0]` on a 1-D tensor
        k = int(m.group(1) or m.group(2))
        for a in suspects:
            need.setdefault(a["name"], k + 1 if k >= 0 else -k)
    grow = {
        a["name"]: a["shape"] + ["n"] * (need[a["name"]] - len(a["shape"]))
        for a in suspects
        if a["kind"] in ("tensor", "tensors") and len(a.get("shape", ["n"])) < need.get(a["name"], 0)
    }
    out, both = [], spec
    for name, shape in grow.items():
        both = _shape_all(both, shape, {name})
    if len(grow) > 1:
        out.append(both)
    return out + [_shape_all(spec, shape, {name}) for name, shape in grow.items()]


def slot_fixes(spec: dict[str, Any], msg: str, line: str) -> list[dict[str, Any]]:
    """`out[rank] = x` where `out[rank]` has fewer dimensions than `x` (`expand(...): the number of sizes
    provided (0) must be greater or equal to the number of dimensions`): `out` is one slot of x's shape
    per rank."""
    if "number of sizes provided" not in msg:
        return []
    m = re.search(r"\b(\w+)\s*\[[^\]]+\]\s*=\s*(\w+)\s*$", line)
    args = {a["name"]: a for a in _tensor_args(spec)}
    if not m or m.group(1) not in args or m.group(2) not in args:
        return []
    want = ["ws"] + args[m.group(2)].get("shape", ["n"])
    return [] if args[m.group(1)].get("shape") == want else [_shape_all(spec, want, {m.group(1)})]


UNPACK = r"(?:values to unpack \(expected (\d+), got (\d+)\)|too many values to unpack \(expected (\d+)\))"


def unpack_fixes(spec: dict[str, Any], msg: str, line: str) -> list[dict[str, Any]]:
    """`b, s, h = x.shape` (or `x.size()`) on a tensor of another number of dimensions: x gets exactly as many."""
    m = re.search(UNPACK, msg)
    u = re.search(r"=\s*(?:self\.)?(\w+)\s*\.\s*(?:shape\b|size\(\s*\))(?!\s*\[)", line)
    if not m or not u:
        return []
    k = int(m.group(1) or m.group(3))
    return [
        _shape_all(spec, (a.get("shape", []) + ["n"] * k)[:k], {a["name"]})
        for a in _all_args(spec)
        if a["name"] == u.group(1) and a["kind"] in ("tensor", "tensors") and len(a.get("shape", [])) != k
    ]


GRAD_SHAPE = r"returned an invalid gradient at index (\d+) - got \[([\d, ]*)\] but expected shape compatible with"


def grad_shape_fixes(spec: dict[str, Any], msg: str, ws: int = SEARCH_WS) -> list[dict[str, Any]]:
    """An autograd Function run forward and backward (`backward_of`) whose backward returns, for its input
    `index`, a gradient of another shape: that input takes the gradient's shape (a bias is 1-D)."""
    m = re.search(GRAD_SHAPE, msg)
    if not m or not spec.get("backward_of") or int(m.group(1)) >= len(spec["args"]):
        return []
    a = spec["args"][int(m.group(1))]
    shape = [expr_for(int(x), ws) for x in m.group(2).split(",") if x.strip()]
    if a["kind"] != "tensor" or not shape or None in shape:
        return []
    return [_shape_all(spec, shape, {a["name"]})]  # type: ignore[arg-type]
