"""Find the communication call sites inside a piece of a module, with Python's scoping rules."""

from __future__ import annotations

import libcst as cst

from mgbench.scrapers.cstwalk import children, statements
from mgbench.scrapers.records import CallSite
from mgbench.scrapers.resolve import Resolver, Scope


def scan_calls(
    res: Resolver, roots: list[cst.CSTNode], scope: Scope, pg_attrs: set[str], skip: set[int] | None = None
) -> list[tuple[cst.CSTNode, CallSite]]:
    """(node, site) for every op call and op reference under `roots`, in source order.

    Nested functions and lambdas get their own scope (parameters and locals shadow outer aliases);
    class bodies get a scope their methods do not see. `skip` holds ids of nodes that are not
    references (alias-assignment values). An op counts as a reference only in a value position
    (an argument, an element, a returned or assigned value): `assert dist.all_reduce` does not."""
    skip = set(skip or ())
    values: set[int] = set()
    out: list[tuple[cst.CSTNode, CallSite]] = []
    stack: list[tuple[cst.CSTNode, Scope]] = [(n, scope) for n in reversed(roots)]
    while stack:
        n, sc = stack.pop()
        t = type(n)
        if t is cst.Import or t is cst.ImportFrom:
            continue
        if t is cst.FunctionDef:
            fsc, aliases = res.function_scope(n, sc)
            skip |= aliases
            todo = [(s, fsc) for s in statements(n.body)]
            todo += [(d.decorator, sc) for d in n.decorators]
            todo += [(p.default, sc) for p in _params(n.params) if p.default is not None]
            stack.extend(reversed(todo))
            continue
        if t is cst.Lambda:
            fsc, _ = res.function_scope(n, sc)
            stack.append((n.body, fsc))
            continue
        if t is cst.ClassDef:
            csc = Scope(sc)
            todo = [(b.value, sc) for b in n.bases] + [(d.decorator, sc) for d in n.decorators]
            todo += [(s, sc if type(s) is cst.FunctionDef else csc) for s in statements(n.body)]
            stack.extend(reversed(todo))
            continue
        if t is cst.Call:
            site = res.match_call(n, sc, pg_attrs)
            if site is not None:
                out.append((n, site))
                f = n.func
                while type(f) is cst.Attribute:  # x.all_reduce.default: the chain is one use
                    skip.add(id(f))
                    f = f.value
                skip.add(id(f))
                skip.update(id(a.value) for a in n.args)
            stack.extend((c, sc) for c in reversed(children(n)))
            continue
        if t is cst.Attribute or t is cst.Name:
            if id(n) in values and id(n) not in skip:
                site = res.reference(n, sc, pg_attrs)
                if site is not None:
                    out.append((n, site))
                    continue
            if t is cst.Attribute:
                stack.append((n.value, sc))
            continue
        if t is cst.Arg:
            values.add(id(n.value))
            stack.append((n.value, sc))
            continue
        if t in _STORES:
            # binding a name, or monkeypatching `dist.all_reduce = f`, is not a use of the op
            tgt = _store_target(n)
            if t is cst.AnnAssign and n.value is not None:
                values.add(id(n.value))
            for c in reversed(children(n)):
                if c is tgt and type(c) is cst.Name:
                    continue
                stack.append((c.value if c is tgt and type(c) is cst.Attribute else c, sc))
            continue
        field = _VALUE_FIELD.get(t)
        if field is not None and (t is not cst.IfExp or id(n) in values):
            for f in field:
                v = getattr(n, f)
                if v is not None:
                    values.add(id(v))
        stack.extend((c, sc) for c in reversed(children(n)))
    return out


_STORES = frozenset({cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.AsName})


_VALUE_FIELD = {
    cst.Element: ("value",),
    cst.StarredElement: ("value",),
    cst.DictElement: ("value",),
    cst.Return: ("value",),
    cst.Yield: ("value",),
    cst.Assign: ("value",),
    cst.IfExp: ("body", "orelse"),
}


def _store_target(n: cst.CSTNode) -> cst.CSTNode:
    return n.name if type(n) is cst.AsName else n.target


def _params(p: cst.Parameters) -> list[cst.Param]:
    out = [*p.posonly_params, *p.params, *p.kwonly_params]
    if isinstance(p.star_arg, cst.Param):
        out.append(p.star_arg)
    if p.star_kwarg is not None:
        out.append(p.star_kwarg)
    return out
