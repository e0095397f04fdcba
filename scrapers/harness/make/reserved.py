"""Rename the task contract's names in mined code, so that a mined module can define `solution`,
`make_inputs`, `SIZES`, `oracle` or an `_mg*` name and still become a task.

A task module is the runtime, then the mined code, then the harness tail (`SIZES`, `make_inputs`,
`solution`): a mined `solution` would be replaced by the tail's, a mined `SIZES` would be the tail's
inside the mined code, and a mined `_mg*` name would replace the runtime's. Every module-level binding
of such a name is renamed (definitions, assignments, imports, `global` declarations) together with every
reference that resolves to it under Python's scoping rules; parameters, locals, attributes, keyword
arguments and strings keep their spelling. Only the standard library is used (`ast`), so the renamer runs
wherever the harness renders."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

RESERVED = frozenset({"solution", "make_inputs", "SIZES", "oracle"})  # the task-module contract
_IDENT = re.compile(r"[A-Za-z_]\w*")


class Unrenamable(ValueError):
    """A reserved name is bound in a form the renamer does not rewrite (the message names it)."""


def is_reserved(name: str) -> bool:
    """A name of the task contract or of the harness runtime (`_mg*`, `_MG*`, `_Mg*`)."""
    return name in RESERVED or name.lower().startswith("_mg")


def fresh_name(name: str, taken: set[str]) -> str:
    """The new spelling of reserved `name`: `mined_solution`, `_mined_mg_call`; a trailing `_` is added
    until it collides with no identifier of the module."""
    new = f"_mined{name}" if name.startswith("_") else f"mined_{name}"
    while new in taken or is_reserved(new):
        new += "_"
    return new


@dataclass
class _Scope:
    kind: str  # module | function | class | comprehension
    parent: _Scope | None = None
    local: set[str] = field(default_factory=set)
    globals: set[str] = field(default_factory=set)
    nonlocals: set[str] = field(default_factory=set)

    def resolves_to_module(self, name: str) -> bool:
        """Whether `name` used in this scope means the module-level binding."""
        s: _Scope | None = self
        first = True
        while s is not None:
            if s.kind == "module" or name in s.globals:
                return True
            if name in s.nonlocals:
                return False
            if name in s.local and (first or s.kind != "class"):  # methods do not see class locals
                return False
            s, first = s.parent, False
        return True

    def binding_scope(self) -> _Scope:
        """Where a walrus target binds: the nearest scope that is not a comprehension."""
        s = self
        while s.kind == "comprehension" and s.parent is not None:
            s = s.parent
        return s


@dataclass
class _Use:
    """One spelling of a name: `kind` is name | def | alias | global | except | match."""

    kind: str
    node: ast.AST
    name: str
    scope: _Scope
    binds: bool


_COMPS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


class _Walker:
    """Every name spelling of a module with the scope it is spelled in (scopes are built on the way:
    a function's locals are complete only after its body is walked, so resolve after the walk)."""

    def __init__(self) -> None:
        self.uses: list[_Use] = []

    def use(self, kind: str, node: ast.AST, name: str, scope: _Scope, binds: bool) -> None:
        self.uses.append(_Use(kind, node, name, scope, binds))
        if binds:
            scope.local.add(name)

    def walk(self, node: ast.AST, scope: _Scope) -> None:
        if isinstance(node, _FUNCS) or isinstance(node, ast.Lambda):
            self._function(node, scope)
        elif isinstance(node, ast.ClassDef):
            for x in [*node.decorator_list, *node.bases, *node.keywords]:
                self.walk(x, scope)
            self.use("def", node, node.name, scope, True)
            inner = _Scope("class", scope)
            for s in node.body:
                self.walk(s, inner)
        elif isinstance(node, _COMPS):
            self._comprehension(node, scope)
        elif isinstance(node, ast.NamedExpr):
            self.walk(node.value, scope)
            self.walk(node.target, scope.binding_scope())
        elif isinstance(node, ast.Name):
            self.use("name", node, node.id, scope, not isinstance(node.ctx, ast.Load))
        elif isinstance(node, ast.alias):
            if node.name != "*":
                self.use("alias", node, node.asname or node.name.split(".")[0], scope, True)
        elif isinstance(node, ast.ExceptHandler):
            if node.type is not None:
                self.walk(node.type, scope)
            if node.name:
                self.use("except", node, node.name, scope, True)
            for s in node.body:
                self.walk(s, scope)
        elif isinstance(node, ast.Global):
            scope.globals.update(node.names)
            for n in node.names:
                self.use("global", node, n, scope, False)
        elif isinstance(node, ast.Nonlocal):
            scope.nonlocals.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            self.use("match", node, node.name, scope, True)
            for c in ast.iter_child_nodes(node):
                self.walk(c, scope)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            self.use("match", node, node.rest, scope, True)
            for c in ast.iter_child_nodes(node):
                self.walk(c, scope)
        else:
            for c in ast.iter_child_nodes(node):
                self.walk(c, scope)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, scope: _Scope) -> None:
        a = node.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x)]
        outside: list[ast.AST] = [*a.defaults, *(d for d in a.kw_defaults if d is not None)]
        if not isinstance(node, ast.Lambda):
            outside += node.decorator_list
            outside += [x.annotation for x in params if x.annotation is not None]
            outside += [node.returns] if node.returns is not None else []
        for x in outside:
            self.walk(x, scope)
        if not isinstance(node, ast.Lambda):
            self.use("def", node, node.name, scope, True)
        inner = _Scope("function", scope)
        inner.local.update(x.arg for x in params)
        for s in node.body if isinstance(node.body, list) else [node.body]:
            self.walk(s, inner)

    def _comprehension(self, node: ast.AST, scope: _Scope) -> None:
        gens = node.generators  # type: ignore[attr-defined]
        self.walk(gens[0].iter, scope)  # the first iterable is evaluated outside
        inner = _Scope("comprehension", scope)
        for i, g in enumerate(gens):
            if i:
                self.walk(g.iter, inner)
            self.walk(g.target, inner)
            for cond in g.ifs:
                self.walk(cond, inner)
        for part in ("elt", "key", "value"):
            if hasattr(node, part):
                self.walk(getattr(node, part), inner)


def _module_uses(tree: ast.Module) -> list[_Use]:
    w = _Walker()
    module = _Scope("module")
    for s in tree.body:
        w.walk(s, module)
    return w.uses


def _span(lines: list[bytes], node: ast.AST) -> tuple[int, int, int]:
    """(line index, start byte, end byte) of a one-line node (ast offsets are UTF-8 byte offsets)."""
    if node.lineno != node.end_lineno:  # type: ignore[attr-defined]
        raise Unrenamable("spans lines")
    return node.lineno - 1, node.col_offset, node.end_col_offset  # type: ignore[attr-defined]


def _edit_for(use: _Use, new: str, lines: list[bytes]) -> list[tuple[int, int, int, bytes]]:
    """(line index, start, end, replacement) edits that respell `use` as `new`."""
    old, nb = use.name.encode(), new.encode()
    node = use.node
    if use.kind == "name":
        i, a, b = _span(lines, node)
        if lines[i][a:b] != old:  # positions inside f-strings are not reliable before Python 3.12
            raise Unrenamable("its position does not spell it")
        return [(i, a, b, nb)]
    if use.kind == "def":
        i = node.lineno - 1  # the `def`/`class` line (decorators come before it)
        kw = rb"class" if isinstance(node, ast.ClassDef) else rb"(?:async\s+)?def"
        m = re.compile(kw + rb"\s+(" + re.escape(old) + rb")\b").match(lines[i], node.col_offset)
        if m is None:
            raise Unrenamable("definition not on one line")
        return [(i, m.start(1), m.end(1), nb)]
    if use.kind == "alias":
        i, a, b = _span(lines, node)
        if node.asname:  # `x as solution`: the alias ends with the bound name
            return [(i, b - len(old), b, nb)]
        if "." in node.name:
            raise Unrenamable("`import solution.x` binds a package")
        return [(i, a, b, old + b" as " + nb)]
    if use.kind == "global":
        i, a, b = _span(lines, node)
        rx = re.compile(rb"\b" + re.escape(old) + rb"\b")
        return [(i, m.start(), m.end(), nb) for m in rx.finditer(lines[i], a, b)]
    if use.kind == "except":
        i = node.lineno - 1
        m = re.compile(rb"\bas\s+(" + re.escape(old) + rb")\b").search(lines[i], node.col_offset)
        if m is None:
            raise Unrenamable("`except ... as` not on one line")
        return [(i, m.start(1), m.end(1), nb)]
    raise Unrenamable(f"bound by a {use.kind} pattern")


def rename_reserved(source: str) -> tuple[str, dict[str, str]]:
    """`source` with every module-level binding of a reserved name renamed (and the references to it);
    also {old: new}. Raises Unrenamable (naming the name) for a binding it cannot respell and SyntaxError
    for code that does not parse. Source without such a binding comes back unchanged."""
    tree = ast.parse(source)
    uses = _module_uses(tree)
    bound = {u.name for u in uses if (u.binds or u.kind == "global") and u.scope.resolves_to_module(u.name)}
    targets = sorted(n for n in bound if is_reserved(n))
    if not targets:
        return source, {}
    taken = set(_IDENT.findall(source))
    renames: dict[str, str] = {}
    for n in targets:
        renames[n] = fresh_name(n, taken)
        taken.add(renames[n])
    lines = source.encode().split(b"\n")
    edits: set[tuple[int, int, int, bytes]] = set()
    for u in uses:
        if u.name in renames and u.scope.resolves_to_module(u.name):
            try:
                edits.update(_edit_for(u, renames[u.name], lines))
            except Unrenamable as e:
                raise Unrenamable(f"{u.name!r} (line {u.node.lineno}): {e}") from None
    for i, a, b, text in sorted(edits, reverse=True):
        lines[i] = lines[i][:a] + text + lines[i][b:]
    out = b"\n".join(lines).decode()
    left = {u.name for u in _module_uses(ast.parse(out)) if u.binds and u.scope.resolves_to_module(u.name)}
    if left & set(renames):
        raise Unrenamable(f"{sorted(left & set(renames))[0]!r} is still bound after renaming")
    return out, renames


def renamed_entry(entry: str, renames: dict[str, str]) -> str:
    """The entry to call after renaming: `solution` -> `mined_solution`, `SIZES.forward` (a method of a
    renamed class) -> `mined_SIZES.forward`."""
    head, dot, rest = entry.partition(".")
    return renames.get(head, head) + dot + rest
