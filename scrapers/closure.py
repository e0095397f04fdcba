"""Scope closure: a unit (function, method or autograd.Function class) plus the module-level
imports, helper functions, classes and constants it needs, transitively, emitted as one module.

Imports are pruned to the names used; a method's class keeps its `__init__`, its class-level
statements and the methods reachable through `self.` / `cls.`; statements keep their original
order (with `from __future__` first) and formatting, comments included.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from mgbench.scrapers.cstwalk import children, nested_blocks, statements
from mgbench.scrapers.resolve import _target_names

BUILTINS = frozenset(dir(builtins)) | {
    "__file__",
    "__name__",
    "__doc__",
    "__spec__",
    "__package__",
    "__builtins__",
    "__loader__",
    "__path__",
    "__class__",
}


_BINDERS = frozenset({cst.AssignTarget, cst.For, cst.CompFor, cst.NamedExpr, cst.AnnAssign})


def used_and_bound(node: cst.CSTNode) -> tuple[set[str], set[str]]:
    """Names read and names bound anywhere under `node` (function locals included)."""
    used: set[str] = set()
    bound: set[str] = set()
    stack: list[cst.CSTNode] = [node]
    while stack:
        n = stack.pop()
        t = type(n)
        if t is cst.Name:
            used.add(n.value)
        elif t is cst.Attribute or t is cst.Arg:
            stack.append(n.value)
        elif t is cst.FunctionDef or t is cst.ClassDef:
            bound.add(n.name.value)
            stack.extend(c for c in children(n) if c is not n.name)
        elif t is cst.Param:
            bound.add(n.name.value)
            stack.extend(x for x in (n.annotation, n.default) if x is not None)
        elif t in _BINDERS:
            tgt = n.target
            names = _target_names(tgt)
            bound.update(names)
            stack.extend(c for c in children(n) if c is not tgt or not names)
        elif t is cst.AugAssign:
            bound.update(_target_names(n.target))
            stack.extend(children(n))
        elif t is cst.AsName:
            bound.update(_target_names(n.name))
        elif t is cst.Import or t is cst.ImportFrom:
            bound.update(import_locals(n))
        elif t is cst.Global or t is cst.Nonlocal:
            used.update(x.name.value for x in n.names)
        else:
            stack.extend(children(n))
    return used, bound


def free_names(node: cst.CSTNode) -> set[str]:
    used, bound = used_and_bound(node)
    return used - bound - BUILTINS


def import_locals(s: cst.Import | cst.ImportFrom) -> list[str]:
    if isinstance(s, cst.ImportFrom) and isinstance(s.names, cst.ImportStar):
        return []
    out = []
    for a in s.names:
        if a.asname is not None and isinstance(a.asname.name, cst.Name):
            out.append(a.asname.name.value)
        elif isinstance(s, cst.Import):
            out.append(cst.Module([]).code_for_node(a.name).split(".")[0])
        else:
            out.append(a.name.value if isinstance(a.name, cst.Name) else "")
    return out


def top_binds(stmt: cst.CSTNode) -> set[str]:
    """Names a top-level statement binds at module scope."""
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return {stmt.name.value}
    out: set[str] = set()
    if isinstance(stmt, cst.SimpleStatementLine):
        for s in stmt.body:
            if isinstance(s, cst.Assign):
                for t in s.targets:
                    out.update(_target_names(t.target))
            elif isinstance(s, (cst.AnnAssign, cst.AugAssign)):
                out.update(_target_names(s.target))
            elif isinstance(s, (cst.Import, cst.ImportFrom)):
                out.update(import_locals(s))
        return out
    if isinstance(stmt, cst.For):
        out.update(_target_names(stmt.target))
    if isinstance(stmt, cst.With):
        out.update(n for i in stmt.items if i.asname is not None for n in _target_names(i.asname.name))
    for block in nested_blocks(stmt):
        for s in block:
            out |= top_binds(s)
    return out


def is_import_line(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
    )


def is_future(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and isinstance(stmt.body[0], cst.ImportFrom)
        and isinstance(stmt.body[0].module, cst.Name)
        and stmt.body[0].module.value == "__future__"
    )


def prune_imports(stmt: cst.SimpleStatementLine, keep: set[str]) -> cst.SimpleStatementLine | None:
    """The import line with only the aliases binding names in `keep` (None if nothing is left)."""
    body = []
    for s in stmt.body:
        if isinstance(s, cst.ImportFrom) and isinstance(s.names, cst.ImportStar):
            body.append(s)
            continue
        names = [a for a, local in zip(s.names, import_locals(s)) if local in keep]
        if not names:
            continue
        names[-1] = names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        body.append(s.with_changes(names=names))
    if not body:
        return None
    body[-1] = body[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
    return stmt.with_changes(body=body)


def class_methods(cls: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    return {s.name.value: s for s in statements(cls.body) if isinstance(s, cst.FunctionDef)}


def reachable_methods(cls: cst.ClassDef, start: set[str]) -> set[str]:
    """Methods reachable from `start` through self.X / cls.X / ClassName.X (plus __init__ and the methods
    that class-level statements name, such as `state = property(_get_state, _set_state)`)."""
    methods = class_methods(cls)
    owners = {"self", "cls", cls.name.value}
    by_name = set().union(
        *(
            used_and_bound(s)[0]
            for s in statements(cls.body)  # `x = property(_get_x)`
            if not isinstance(s, cst.FunctionDef)
        )
    )
    keep = {m for m in start | by_name | {"__init__", "__post_init__"} if m in methods}
    todo = list(keep)
    while todo:
        stack: list[cst.CSTNode] = [methods[todo.pop()]]
        while stack:
            n = stack.pop()
            if (
                isinstance(n, cst.Attribute)
                and isinstance(n.value, cst.Name)
                and n.value.value in owners
                and n.attr.value in methods
                and n.attr.value not in keep
            ):
                keep.add(n.attr.value)
                todo.append(n.attr.value)
            stack.extend(children(n))
    return keep


def prune_class(cls: cst.ClassDef, keep: set[str]) -> cst.ClassDef:
    body = [s for s in statements(cls.body) if not isinstance(s, cst.FunctionDef) or s.name.value in keep]
    if isinstance(cls.body, cst.IndentedBlock):
        return cls.with_changes(body=cls.body.with_changes(body=body))
    return cls


def module_binders(body: list[cst.CSTNode]) -> dict[str, list[int]]:
    """Name -> indices of the top-level statements binding it."""
    binders: dict[str, list[int]] = {}
    for i, s in enumerate(body):
        for name in top_binds(s):
            binders.setdefault(name, []).append(i)
    return binders


@dataclass
class Needed:
    """Top-level statements a set of names needs, transitively (see `collect`)."""

    included: set[int]  # definitions / constants / other statements
    imports: dict[int, set[str]]  # import line -> the local names it must still bind
    seen: set[str]
    unresolved: set[str]


def collect(
    body: list[cst.CSTNode],
    binders: dict[str, list[int]],
    names: set[str] | list[str],
    skip: tuple[int | None, str | None] = (None, None),
) -> Needed:
    """The statements binding `names` and, transitively, the names they use (imports stop the walk).

    `skip` = (statement index, name): that binding of the unit itself is not a helper."""
    top_index, unit_name = skip
    need = Needed(set(), {}, set(), set())
    queue = sorted(names)
    while queue:
        name = queue.pop()
        if name in need.seen:
            continue
        need.seen.add(name)
        idxs = [i for i in binders.get(name, []) if not (i == top_index and name == unit_name)]
        if not idxs:
            if name != unit_name:
                need.unresolved.add(name)
            continue
        for i in idxs:
            if is_import_line(body[i]):
                need.imports.setdefault(i, set()).add(name)
                continue
            if i not in need.included:
                need.included.add(i)
                used, bound = used_and_bound(body[i])
                # a statement that reads a name it rebinds (`f = torch.jit.script(f)`) needs its earlier binder
                queue.extend(sorted(((used - bound - BUILTINS) | (used & top_binds(body[i]))) - need.seen))
    return need


@dataclass
class Closure:
    source: str
    compiles: bool
    helpers: list[str]  # module-level names pulled in (defs, classes, constants)
    imported: dict[str, cst.CSTNode]  # local name -> kept import statement small-node
    unresolved: list[str]
    uses_globals: list[str]
    error: str | None = None


def build_closure(
    module: cst.Module,
    unit_node: cst.CSTNode,
    top_index: int | None,
    global_decls: set[str],
    code_of: Callable[[int], str] | None = None,
) -> Closure:
    """Emit `unit_node` (a def or a pruned class) with everything it needs from `module`.

    `top_index` is the unit's own top-level statement (excluded as a helper unless needed by name);
    `global_decls` are names some function of the module declares `global` (mutable state);
    `code_of(i)` returns the (cached) code of top-level statement i."""
    code_of = code_of or (lambda i: module.code_for_node(module.body[i]))
    body = list(module.body)
    binders = module_binders(body)
    unit_name = getattr(getattr(unit_node, "name", None), "value", None)
    need = collect(body, binders, free_names(unit_node), skip=(top_index, unit_name))
    included, need_import, seen, unresolved = need.included, need.imports, need.seen, need.unresolved
    futures_idx = {i for i, s in enumerate(body) if is_future(s)}
    order = sorted(included | set(need_import) | futures_idx | ({top_index} if top_index is not None else set()))
    pieces: list[str] = [code_of(i) for i in order if is_future(body[i])]
    imported: dict[str, cst.CSTNode] = {}
    helpers: list[str] = []

    def emit(i: int, node: cst.CSTNode) -> None:
        text = code_of(i) if node is body[i] else module.code_for_node(node)
        pieces.append(text if text.endswith("\n") else text + "\n")

    for i in order:
        s = body[i]
        if is_future(s):
            continue
        if i == top_index:
            emit(i, unit_node)
            if i in included:
                helpers.extend(sorted(top_binds(s) & seen - {unit_name}))
            continue
        if i in need_import and i not in included:
            s = prune_imports(s, need_import[i])
            if s is None:
                continue
        if is_import_line(s):
            for small in s.body:
                for local in import_locals(small):
                    imported[local] = small
        else:
            helpers.extend(sorted(top_binds(s) & seen))
        emit(i, s)
    if top_index is None:
        pieces.append(module.code_for_node(unit_node))
    src = "".join(pieces)
    compiles, err = True, None
    try:
        compile(src, "<extracted>", "exec")
    except (SyntaxError, ValueError, RecursionError) as e:
        compiles, err = False, f"{type(e).__name__}: {e}"
    uses = sorted(n for n in seen if n in global_decls or _assigned_none(body, binders.get(n, [])))
    return Closure(src, compiles, sorted(set(helpers)), imported, sorted(unresolved), uses, err)


def _assigned_none(body: list[cst.CSTNode], idxs: list[int]) -> bool:
    for i in idxs:
        s = body[i]
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if (
                    isinstance(small, (cst.Assign, cst.AnnAssign))
                    and isinstance(small.value, cst.Name)
                    and small.value.value == "None"
                ):
                    return True
    return False


def module_global_decls(module: cst.Module) -> set[str]:
    """Names declared `global` inside any function of the module."""
    out: set[str] = set()
    stack: list[cst.CSTNode] = list(module.body)
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Global):
            out.update(x.name.value for x in n.names)
        elif isinstance(n, (cst.BaseExpression,)):
            continue
        else:
            stack.extend(children(n))
    return out
