"""Captured arguments -> harness argument specs: one expression per size that reproduces what the caller
passed on every rank and world size, and scales with the task's size `n`.

A capture run records each argument on every rank of a world of 2 and of 4 (`Observed`: ws -> one record
per rank, see record.py). A size is fitted, first match, as the rank, the world size, a constant, a total
split over the ranks (`T//ws`), a per-rank size times the world (`s*ws`), or linear in the rank (uneven);
at the smoke size (n = SMOKE_N) every fitted expression gives exactly the captured value. Tensor
dimensions other than 1 grow with n (a test's [2, 4, 32] grows as a whole, not into 8 tokens of a vast
vocabulary), integer arguments from SCALE_MIN on or when equal to such a dimension; the full size is then
set by bytes per rank (run/settle.py), and the relations between the caller's tensors (rows of logits and
labels, a vocabulary and its shards) hold at every size.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from mgbench.scrapers.harness.make.render import SMOKE_N

SCALE_MIN = 8  # smaller integer arguments (top-k, head counts, flags as ints) do not grow with n ...
DIM_SCALE_MIN = 2  # ... but every tensor dimension but 1 does: a test's [2, 4, 32] grows as a whole
Observed = dict[int, list[dict[str, Any]]]  # world size -> the record of one argument on each rank

# one value per (world size, rank), and the least size that scales -> an expression in n, ws, rank, or
# None; first match wins
IntFit = Callable[[dict[tuple[int, int], int], int], str | None]  # (values, least size that scales)


def scaled(v: int, least: int = SCALE_MIN) -> str:
    """`v` at the smoke size, growing with n when it is a size (at least `least`)."""
    return f"{v}*n//{SMOKE_N}" if v >= least else str(v)


def _per_ws(vals: dict[tuple[int, int], int]) -> dict[int, int] | None:
    """ws -> the value when every rank of that world size saw the same one."""
    out: dict[int, int] = {}
    for (ws, _), v in vals.items():
        if out.setdefault(ws, v) != v:
            return None
    return out


def _rank(vals: dict[tuple[int, int], int], least: int) -> str | None:
    return "rank" if len(vals) > 1 and all(v == r for (_, r), v in vals.items()) else None


def _world(vals: dict[tuple[int, int], int], least: int) -> str | None:
    return "ws" if len({ws for ws, _ in vals}) > 1 and all(v == ws for (ws, _), v in vals.items()) else None


def _constant(vals: dict[tuple[int, int], int], least: int) -> str | None:
    return scaled(next(iter(vals.values())), least) if len(set(vals.values())) == 1 else None


def _split_total(vals: dict[tuple[int, int], int], least: int) -> str | None:
    """A total cut into world-size shares (a vocabulary shard, a sequence chunk): v = T // ws for one T."""
    per = _per_ws(vals)
    if not per or len(per) < 2:
        return None
    ws0 = min(per)
    for total in range(ws0 * per[ws0], ws0 * per[ws0] + ws0):
        if total and all(total // ws == v for ws, v in per.items()):
            return f"{scaled(total, least)}//ws"
    return None


def _times_world(vals: dict[tuple[int, int], int], least: int) -> str | None:
    """A per-rank size gathered over the world (a gathered buffer): v / ws is the same."""
    per = _per_ws(vals)
    if not per or len(per) < 2 or any(v % ws for ws, v in per.items()):
        return None
    shares = {v // ws for ws, v in per.items()}
    return f"{scaled(shares.pop(), least)}*ws" if len(shares) == 1 else None


def _linear_in_rank(vals: dict[tuple[int, int], int], least: int) -> str | None:
    """Uneven over the ranks: a + b * rank on every world size."""
    by_rank = {r: v for (_, r), v in vals.items()}
    if len(by_rank) < 2 or any(by_rank[r] != v for (_, r), v in vals.items()):
        return None
    a, b = by_rank[0], by_rank[1] - by_rank[0]
    if any(v != a + b * r for r, v in by_rank.items()):
        return None
    return f"({a}+{b}*rank)*n//{SMOKE_N}" if a >= least else f"{a}+{b}*rank"


INT_FITS: tuple[tuple[str, IntFit], ...] = (
    ("rank", _rank),
    ("world size", _world),
    ("constant", _constant),
    ("total split over the ranks", _split_total),
    ("per-rank size times the world", _times_world),
    ("linear in the rank", _linear_in_rank),
)


def fit_int(vals: dict[tuple[int, int], int], least: int = SCALE_MIN) -> str | None:
    """The first INT_FITS expression that gives every observed value (keyed by (ws, rank)); sizes of at
    least `least` scale with n."""
    for _, f in INT_FITS:
        expr = f(vals, least)
        if expr is not None:
            return expr
    return None


def _values(obs: Observed, get: Callable[[dict[str, Any]], Any]) -> dict[tuple[int, int], Any]:
    return {(ws, r): get(rec) for ws, recs in obs.items() for r, rec in enumerate(recs)}


def _same(obs: Observed, key: str) -> Any:
    vals = list(_values(obs, lambda rec: rec.get(key)).values())
    return vals[0] if len({repr(v) for v in vals}) == 1 else None


def _shape(obs: Observed) -> list[str] | None:
    ranks = {len(rec["shape"]) for recs in obs.values() for rec in recs}
    if len(ranks) != 1:
        return None
    dims = [fit_int(_values(obs, lambda rec, d=d: rec["shape"][d]), DIM_SCALE_MIN) for d in range(ranks.pop())]
    return None if any(d is None for d in dims) else dims  # type: ignore[return-value]


def _replicated(obs: Observed) -> bool:
    """Every rank of every world size saw the same values (records without digests: not known, False)."""
    return all(
        len(recs) > 1 and len({r.get("digest") for r in recs}) == 1 and recs[0].get("digest") for recs in obs.values()
    )


def _tensor(name: str, obs: Observed) -> dict[str, Any] | None:
    shape, dtype = _shape(obs), _same(obs, "dtype")
    if shape is None or dtype is None:
        return None
    a: dict[str, Any] = {"name": name, "kind": "tensor", "shape": shape, "dtype": dtype}
    if _replicated(obs):
        a["replicated"] = True  # the same values on every rank (labels the ranks share): one draw for all
    if "max" in next(iter(obs.values()))[0] and dtype != "bool":
        # integer values (labels, ids, indices) are drawn in [0, high): the largest value seen, plus one
        high = max(rec.get("max", 0) for recs in obs.values() for rec in recs) + 1  # an empty one has none
        a["high"] = scaled(high)
    return a


def _splits(name: str, obs: Observed) -> dict[str, Any] | None:
    if any(len(rec["value"]) != ws for ws, recs in obs.items() for rec in recs):
        return None
    vals = {(ws, r): v for ws, recs in obs.items() for r, rec in enumerate(recs) for v in rec["value"]}
    if len(set(vals.values())) == 1:
        return {"name": name, "kind": "splits", "expr": scaled(next(iter(vals.values())))}
    return None  # uneven: the sizes of the tensors they cut would have to follow (the guess's UNEVEN_SPLITS)


def _scalar(kind: str) -> Callable[[str, Observed], dict[str, Any] | None]:
    def fit(name: str, obs: Observed) -> dict[str, Any] | None:
        value = _same(obs, "value")
        if value is None and kind != "none":
            return None
        return {"name": name, "kind": kind, **({"value": value} if kind != "none" else {})}

    return fit


def _integer(name: str, obs: Observed) -> dict[str, Any] | None:
    expr = fit_int(_values(obs, lambda rec: rec["value"]))
    return {"name": name, "kind": "int", "expr": expr} if expr is not None else None


def _string(name: str, obs: Observed) -> dict[str, Any] | None:
    value = _same(obs, "value")
    return {"name": name, "kind": "const", "value": value} if value is not None else None


# captured kind -> the harness argument it becomes; kinds not listed (modules, objects, callables, groups
# and mixed sequences) keep the name guess: a capture has no way to rebuild them on another machine
ARG_FITS: dict[str, Callable[[str, Observed], dict[str, Any] | None]] = {
    "tensor": _tensor,
    "int": _integer,
    "ints": _splits,
    "float": _scalar("float"),
    "bool": _scalar("bool"),
    "none": _scalar("none"),
    "dtype": _scalar("dtype"),
    "str": _string,
}


def fit_arg(name: str, obs: Observed) -> dict[str, Any] | None:
    """The harness argument that reproduces `obs` (the same kind on every rank and world size), or None."""
    kinds = {rec["kind"] for recs in obs.values() for rec in recs}
    if len(kinds) != 1 or not all(obs.values()):
        return None
    fit = ARG_FITS.get(kinds.pop())
    return fit(name, obs) if fit else None


AXIS_NAME = re.compile(r"(^|_)(dim|axis)(_|$)")  # integer arguments that index dimensions
_SIZE = re.compile(rf"^(\d+)\*n//{SMOKE_N}(//ws)?$")


def _sizes(args: dict[str, dict[str, Any]]) -> list[int]:
    """Sizes the call names (integer arguments, totals that tensors are sharded from), smallest first."""
    exprs = [a["expr"] for a in args.values() if a["kind"] == "int"] + _dim_exprs(args)
    return sorted({int(m.group(1)) for e in exprs if (m := _SIZE.match(e))})


def _tie_ranges(args: dict[str, dict[str, Any]]) -> None:
    """Integer tensors (labels, ids) range over the smallest size of the call that holds every value seen
    (a vocabulary whose shards the logits are), else over the values seen, in place."""
    sizes = _sizes(args)
    for a in args.values():
        if a["kind"] == "tensor" and "high" in a:
            seen = int(a["high"].split("*")[0])
            a["high"] = scaled(next((s for s in sizes if s >= seen), seen))


def _tie_ints(args: dict[str, dict[str, Any]]) -> None:
    """Small integer arguments equal to a tensor dimension of the call (`num_heads` and q's heads) scale
    as that dimension does, in place."""
    dims = {int(m.group(1)) for m in map(_SIZE.match, _dim_exprs(args)) if m}
    for a in args.values():
        if AXIS_NAME.search(a["name"]):
            continue  # `dim=2` beside a dimension of 2 is an axis, not a size
        if a["kind"] == "int" and a["expr"].isdigit() and int(a["expr"]) in dims:
            a["expr"] = scaled(int(a["expr"]), DIM_SCALE_MIN)


def _dim_exprs(args: dict[str, dict[str, Any]]) -> list[str]:
    return [d for a in args.values() if a["kind"] == "tensor" for d in a["shape"]]


def fit_args(captures: dict[int, list[dict[str, dict[str, Any]]]]) -> dict[str, dict[str, Any]]:
    """Parameter name -> harness argument, from `captures` (ws -> per rank: name -> record) of the
    parameters recorded on every rank of every world size."""
    names = set.intersection(*(set(a) for recs in captures.values() for a in recs)) if captures else set()
    out = {}
    for name in sorted(names):
        a = fit_arg(name, {ws: [rec[name] for rec in recs] for ws, recs in captures.items()})
        if a is not None:
            out[name] = a
    _tie_ints(out)
    _tie_ranges(out)
    return out
