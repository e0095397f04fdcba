"""Quote annotations that would use a placeholder at definition time (in a subscript, or an attribute of it).

`def f(opts: List[MegatronOptimizer])` fails when the module is loaded if `MegatronOptimizer` is an
`_MgMissing` placeholder: `typing` probes the argument's attributes and the placeholder raises (so does
`cfg: te.Config`). A quoted annotation (`"List[MegatronOptimizer]"`) is what `from __future__ import
annotations` would have made of it: never evaluated, and annotations do not change what the code
computes. Bare placeholder annotations (`x: MegatronOptimizer`) evaluate fine and stay as they are;
annotations over several lines are not quoted (the inliner keeps treating them as definition-time uses).
"""

from __future__ import annotations

import ast
import re


def _annotations(tree: ast.Module) -> list[ast.expr]:
    """Annotations evaluated when their definition runs: parameters and returns of every function, and
    annotated assignments at module and class level (not those inside function bodies)."""
    out: list[ast.expr] = []

    def walk(body: list[ast.stmt], in_function: bool) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(p for p in (a.vararg, a.kwarg) if p)]
                out.extend(p.annotation for p in params if p.annotation is not None)
                if node.returns is not None:
                    out.append(node.returns)
                walk(node.body, True)
            elif isinstance(node, ast.ClassDef):
                walk(node.body, False)
            elif isinstance(node, ast.AnnAssign) and not in_function:
                out.append(node.annotation)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    sub = getattr(node, field, None)
                    if isinstance(sub, list) and sub and isinstance(sub[0], (ast.stmt, ast.excepthandler)):
                        walk(sub, in_function)

    walk(tree.body, False)
    return out


def _plain(node: ast.expr) -> bool:
    """A bare name, a constant or a `|` union of those: evaluates fine on a placeholder."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _plain(node.left) and _plain(node.right)
    return isinstance(node, (ast.Name, ast.Constant))


def _risky(ann: ast.expr, placeholders: set[str], unbound: set[str] = frozenset()) -> bool:
    """A placeholder used in this annotation other than bare (`List[X]`, `X.Config`): evaluating it would
    fail (`X | None` works: the placeholder answers `|` with itself). An `unbound` name fails even bare."""
    names = {n.id for n in ast.walk(ann) if isinstance(n, ast.Name)}
    return bool(names & unbound) or (not _plain(ann) and bool(names & placeholders))


def module_assigned(tree: ast.Module) -> set[str]:
    """Names bound at module level other than by imports (`X = None` in a fallback branch, `def`, `class`,
    loop and `with` targets): such a name may not be a placeholder when its annotation is evaluated."""
    out: set[str] = set()

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(node.name)
                continue
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With)):
                targets = (
                    node.targets
                    if isinstance(node, ast.Assign)
                    else [i.optional_vars for i in node.items if i.optional_vars]
                    if isinstance(node, ast.With)
                    else [node.target]
                )
                out.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            for field in ("body", "orelse", "finalbody"):
                sub = getattr(node, field, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                    walk(sub)
            for h in getattr(node, "handlers", []):
                walk(h.body)

    walk(tree.body)
    return out


def type_checking_names(tree: ast.Module) -> set[str]:
    """Names imported only for type checkers (`if TYPE_CHECKING: from x import Y`): unbound at run time, so
    an annotation naming one fails when an inlined prelude (several files flattened, without their
    `from __future__ import annotations`) defines it later or not at all."""
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            out.update(
                (a.asname or a.name).split(".")[0]
                for s in node.body
                if isinstance(s, (ast.Import, ast.ImportFrom))
                for a in s.names
            )
    return out


def quote_annotations(
    source: str, tree: ast.Module, placeholders: set[str], unbound: set[str] = frozenset()
) -> list[str]:
    """Lines of `source` with every risky one-line annotation quoted (line count unchanged): one using a
    placeholder other than bare, or naming an `unbound` name at all. A module with
    `from __future__ import annotations` evaluates none and is returned as is."""
    lines = source.splitlines()
    if len(lines) != len(re.split(r"\r\n|\r|\n", source.rstrip("\r\n"))):  # form feeds etc.: ast's lines differ
        return lines
    future = any(
        isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )
    if future or not (placeholders or unbound):
        return lines
    spans = sorted(
        (
            (a.lineno, a.col_offset, a.end_col_offset)
            for a in _annotations(tree)
            if a.lineno == a.end_lineno and _risky(a, placeholders, unbound)
        ),
        reverse=True,
    )
    for line, start, end in spans:  # right to left, so earlier columns stay valid
        text = lines[line - 1].encode()
        segment = text[start:end].decode()
        lines[line - 1] = (text[:start] + repr(segment).encode() + text[end:]).decode()
    return lines
