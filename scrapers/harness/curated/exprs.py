"""Integer expressions of curated entries: configuration dimension names replaced by their numbers.

The task runtime evaluates expressions of `n`, `ws`, `rank` and `i` only (runtime `_mg_eval`); an entry
may also name a configuration's dimensions (`vocab//ws`, `heads*head_dim`), which are substituted here
when the registry is loaded, so rendered tasks carry plain numbers."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any

RUNTIME_NAMES = frozenset({"n", "ws", "rank", "i"})
ALLOWED_NODES = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.FloorDiv,
    ast.Mod,
    ast.Pow,
    ast.USub,
)


class ExprError(ValueError):
    """An expression that cannot be used (unknown name, not arithmetic, a size that is not positive)."""


def substitute(expr: Any, names: dict[str, int]) -> str:
    """`expr` (an int or a string) as a runtime expression: dimension names replaced by their values."""
    if isinstance(expr, bool) or not isinstance(expr, (int, str)):
        raise ExprError(f"{expr!r} is not an integer expression")
    try:
        tree = ast.parse(str(expr), mode="eval")
    except SyntaxError:
        raise ExprError(f"{expr!r} is not an expression") from None
    for node in ast.walk(tree):
        if not isinstance(node, ALLOWED_NODES):
            raise ExprError(f"{expr!r}: only + - * // % ** on integers and names are allowed")
        if isinstance(node, ast.Constant) and (isinstance(node.value, bool) or not isinstance(node.value, int)):
            raise ExprError(f"{expr!r}: {node.value!r} is not an integer")
        if isinstance(node, ast.Name) and node.id not in RUNTIME_NAMES and node.id not in names:
            raise ExprError(f"{expr!r}: unknown name {node.id!r} (known: n, ws, rank, i, {', '.join(sorted(names))})")

    class _Sub(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return ast.Constant(names[node.id]) if node.id in names and node.id not in RUNTIME_NAMES else node

    return ast.unparse(_Sub().visit(tree))


def evaluate(expr: str, n: int, ws: int, rank: int, i: int = 0) -> int:
    """What the runtime computes for `expr` (same names, same integer semantics)."""
    return int(eval(expr, {"__builtins__": {}}, {"n": n, "ws": ws, "rank": rank, "i": i}))  # noqa: S307


def check_values(expr: str, sizes: Iterable[int], world_sizes: Iterable[int], positive: bool = True) -> None:
    """Raise ExprError unless `expr` is a positive integer at every size, world size and rank."""
    for n in sizes:
        for ws in world_sizes:
            for rank in range(ws):
                try:
                    v = evaluate(expr, n, ws, rank)
                except ZeroDivisionError:
                    raise ExprError(f"{expr!r} divides by zero at n={n}, ws={ws}, rank={rank}") from None
                if positive and v < 1:
                    raise ExprError(f"{expr!r} is {v} at n={n}, ws={ws}, rank={rank} (a size must be >= 1)")
