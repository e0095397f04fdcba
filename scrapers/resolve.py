"""Scope-aware qualified-name resolution of torch.distributed communication calls in a libcst tree.

Follows every import spelling (`import torch.distributed as dist`, `from torch import distributed`,
`from torch.distributed import all_reduce as ar`, star imports, relative imports inside torch's own
sources), simple assignment aliases (`c10d = torch.distributed.distributed_c10d`), facade modules
that re-export the API (e.g. `deepspeed.comm`) and ProcessGroup method calls whose receiver is
provably a group (assigned from `new_group()`, annotated `ProcessGroup`, `group.WORLD`, or a
`self.<attr>` set from one of those), falling back to a name heuristic for PG-only method names.
Function parameters and local assignments shadow module aliases, as in Python.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from mgbench.scrapers import ops as O
from mgbench.scrapers.cstwalk import children, dotted, nested_blocks, statements
from mgbench.scrapers.records import CallSite

PG = "<pg>"
PG_NAME = re.compile(r"(?:pg|group)s?$", re.I)
_DEFS = (cst.FunctionDef, cst.ClassDef)


@dataclass
class Binding:
    qual: str | None  # qualified name; PG for a ProcessGroup value; None when shadowed / unknown
    via: str  # import | assign | relative | local_def | param | shadow


@dataclass
class Scope:
    parent: Scope | None = None
    names: dict[str, Binding] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)

    def lookup(self, name: str) -> Binding | None:
        s: Scope | None = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None

    def star_modules(self) -> list[str]:
        out, s = [], self
        while s is not None:
            out.extend(s.stars)
            s = s.parent
        return out


def module_name_for(path: str) -> tuple[str | None, bool]:
    """Dotted module name of a repository path (src/ and python/ layouts stripped), is_package."""
    if not path.endswith(".py"):
        return None, False
    parts = path[:-3].split("/")
    if len(parts) > 1 and parts[0] in ("src", "python", "lib"):
        parts = parts[1:]
    is_pkg = parts[-1] == "__init__"
    if is_pkg:
        parts = parts[:-1]
    if not parts or not all(p.isidentifier() for p in parts):
        return None, is_pkg
    return ".".join(parts), is_pkg


class Resolver:
    """Resolution state for one module."""

    def __init__(self, module_name: str | None = None, is_package: bool = False, facades: dict[str, str] | None = None):
        self.module_name, self.is_package = module_name, is_package
        self.facades = facades or {}

    # ---- bindings ---------------------------------------------------------------------------
    def absolute(self, level: int, module: str | None) -> str | None:
        if level == 0:
            return module
        if not self.module_name:
            return None
        base = self.module_name.split(".")
        if not self.is_package:
            base = base[:-1]
        if level - 1 > len(base):
            return None
        base = base[: len(base) - (level - 1)]
        return ".".join(base + ([module] if module else [])) or None

    def _bind_import(self, stmt: cst.CSTNode, scope: Scope) -> None:
        if isinstance(stmt, cst.Import):
            for a in stmt.names:
                full = dotted(a.name)
                if a.asname is not None and isinstance(a.asname.name, cst.Name):
                    scope.names[a.asname.name.value] = Binding(full, "import")
                elif full:
                    head = full.split(".")[0]
                    scope.names[head] = Binding(head, "import")
        elif isinstance(stmt, cst.ImportFrom):
            level = len(stmt.relative)
            mod = self.absolute(level, dotted(stmt.module) if stmt.module is not None else None)
            via = "relative" if level else "import"
            if isinstance(stmt.names, cst.ImportStar):
                if mod:
                    scope.stars.append(mod)
                return
            for a in stmt.names:
                name = dotted(a.name)
                local = a.asname.name.value if (a.asname is not None and isinstance(a.asname.name, cst.Name)) else name
                if local:
                    scope.names[local] = Binding(f"{mod}.{name}" if mod else None, via)

    def _simple_stmts(self, stmts: list[cst.CSTNode]) -> list[cst.CSTNode]:
        """Small statements of these statements and of nested same-scope blocks, in order."""
        out: list[cst.CSTNode] = []
        for s in stmts:
            if isinstance(s, cst.SimpleStatementLine):
                out.extend(s.body)
            elif isinstance(s, _DEFS):
                out.append(s)
            else:
                if isinstance(s, (cst.For,)):
                    out.append(s)
                if isinstance(s, cst.With):
                    out.append(s)
                for block in nested_blocks(s):
                    out.extend(self._simple_stmts(block))
        return out

    def collect(self, stmts: list[cst.CSTNode], scope: Scope, module_level: bool) -> set[int]:
        """Bind names of a block into `scope`; returns ids of alias-assignment values (not references)."""
        flat = self._simple_stmts(stmts)
        imported: set[str] = set()
        for s in flat:
            if isinstance(s, (cst.Import, cst.ImportFrom)):
                before = set(scope.names)
                self._bind_import(s, scope)
                imported |= set(scope.names) - before
            elif isinstance(s, _DEFS):
                qual = f"{self.module_name}.{s.name.value}" if (module_level and self.module_name) else None
                scope.names[s.name.value] = Binding(qual, "local_def")
        alias_values: set[int] = set()
        declared_global = {n.name.value for s in flat if isinstance(s, cst.Global) for n in s.names}
        for name in declared_global:
            scope.names.pop(name, None)
        for s in flat:
            targets: list[cst.BaseExpression] = []
            value = None
            if isinstance(s, cst.Assign):
                targets, value = [t.target for t in s.targets], s.value
            elif isinstance(s, cst.AnnAssign):
                targets, value = [s.target], s.value
            elif isinstance(s, cst.AugAssign):
                targets = [s.target]
            elif isinstance(s, cst.For):
                targets = [s.target]
            elif isinstance(s, cst.With):
                targets = [i.asname.name for i in s.items if i.asname is not None]
            for t in targets:
                if isinstance(t, cst.Name) and t.value in declared_global:
                    continue
                if isinstance(t, cst.Name):
                    b = self._binding_for_value(value, scope) if value is not None else None
                    if b is not None:
                        scope.names[t.value] = b
                        alias_values.add(id(value))
                        if isinstance(value, cst.IfExp):
                            alias_values.update((id(value.body), id(value.orelse)))
                    elif t.value not in imported:
                        scope.names[t.value] = Binding(None, "shadow")
                else:
                    for n in _target_names(t):
                        if n not in imported:
                            scope.names[n] = Binding(None, "shadow")
        return alias_values

    def _binding_for_value(self, value: cst.BaseExpression, scope: Scope) -> Binding | None:
        if isinstance(value, (cst.Name, cst.Attribute)):
            q = self.qualify(value, scope)
            if q is not None:
                return Binding(q[0], "assign")
        elif isinstance(value, cst.Call):
            q = self.qualify(value.func, scope)
            if q is not None and q[0] in O.PG_FACTORIES:
                return Binding(PG, "assign")
        elif isinstance(value, cst.IfExp):
            # `fn = dist.all_gather_into_tensor if new_torch else dist._all_gather_base`
            for branch in (value.body, value.orelse):
                if isinstance(branch, (cst.Name, cst.Attribute)):
                    q = self.qualify(branch, scope)
                    if q is not None and O.lookup(q[0], self.facades)[0] is not None:
                        return Binding(q[0], "assign")
        return None

    def function_scope(self, fn: cst.FunctionDef | cst.Lambda, parent: Scope) -> tuple[Scope, set[int]]:
        scope = Scope(parent)
        p = fn.params
        for prm in [
            *p.posonly_params,
            *p.params,
            *p.kwonly_params,
            *([p.star_arg] if isinstance(p.star_arg, cst.Param) else []),
            *([p.star_kwarg] if p.star_kwarg is not None else []),
        ]:
            is_pg = prm.annotation is not None and self._is_pg_type(prm.annotation.annotation, parent)
            scope.names[prm.name.value] = Binding(PG if is_pg else None, "param")
        aliases: set[int] = set()
        if isinstance(fn, cst.FunctionDef):
            aliases = self.collect(statements(fn.body), scope, module_level=False)
        return scope, aliases

    def _is_pg_type(self, ann: cst.BaseExpression, scope: Scope) -> bool:
        stack: list[cst.CSTNode] = [ann]
        while stack:
            n = stack.pop()
            if isinstance(n, (cst.Name, cst.Attribute)):
                q = self.qualify(n, scope)
                if q is not None and q[0] in O.PG_TYPES:
                    return True
                if isinstance(n, cst.Attribute):
                    continue
            elif isinstance(n, cst.SimpleString) and "ProcessGroup" in n.value:
                return True
            stack.extend(children(n))
        return False

    # ---- resolution -------------------------------------------------------------------------
    def qualify(self, expr: cst.BaseExpression, scope: Scope) -> tuple[str, str] | None:
        """(qualified name, via) of a Name/Attribute chain, or None when unknown."""
        attrs: list[str] = []
        while isinstance(expr, cst.Attribute):
            attrs.append(expr.attr.value)
            expr = expr.value
        if not isinstance(expr, cst.Name):
            return None
        b = scope.lookup(expr.value)
        if b is None:
            for mod in scope.star_modules():
                cand = f"{mod}.{expr.value}"
                if O.lookup(cand, self.facades)[0] is not None:
                    b = Binding(cand, "star")
                    break
            else:
                return None
        if b.qual is None:
            return None
        return ".".join([b.qual, *reversed(attrs)]), b.via

    def match_call(self, call: cst.Call, scope: Scope, pg_attrs: set[str]) -> CallSite | None:
        func = call.func
        q = self.qualify(func, scope) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if q is not None:
            op, torch_name = O.lookup(q[0], self.facades)
            if op is not None:
                via = "facade" if torch_name != q[0] else q[1]
                return _site(op, torch_name, via, "resolved", call)
        if isinstance(func, cst.Attribute) and func.attr.value in O.PG_METHODS:
            certainty = self._pg_receiver(func.value, scope, pg_attrs, func.attr.value)
            if certainty:
                return _site(
                    O.pg_op(func.attr.value),
                    f"torch.distributed.ProcessGroup.{func.attr.value}",
                    "process_group",
                    certainty,
                    call,
                )
        return None

    def _pg_receiver(self, recv: cst.BaseExpression, scope: Scope, pg_attrs: set[str], method: str) -> str | None:
        if isinstance(recv, (cst.Name, cst.Attribute)):
            q = self.qualify(recv, scope)
            if q is not None and (q[0] == PG or q[0] in O.PG_FACTORIES):
                return "resolved"
            if (
                isinstance(recv, cst.Attribute)
                and isinstance(recv.value, cst.Name)
                and recv.value.value == "self"
                and recv.attr.value in pg_attrs
            ):
                return "resolved"
        elif isinstance(recv, cst.Call):
            q = self.qualify(recv.func, scope) if isinstance(recv.func, (cst.Name, cst.Attribute)) else None
            if q is not None and q[0] in O.PG_FACTORIES:
                return "resolved"
        if method in O.PG_DISTINCT:
            last = recv.attr.value if isinstance(recv, cst.Attribute) else getattr(recv, "value", "")
            if isinstance(last, str) and PG_NAME.search(last):
                return "heuristic"
        return None

    def reference(self, node: cst.BaseExpression, scope: Scope, pg_attrs: set[str] = frozenset()) -> CallSite | None:
        """An op used as a value (passed, stored, returned) rather than called here."""
        q = self.qualify(node, scope)
        if q is None:
            if isinstance(node, cst.Attribute) and node.attr.value in O.PG_DISTINCT:
                certainty = self._pg_receiver(node.value, scope, pg_attrs, node.attr.value)
                if certainty:
                    site = _site(
                        O.pg_op(node.attr.value),
                        f"torch.distributed.ProcessGroup.{node.attr.value}",
                        "process_group",
                        certainty,
                        None,
                    )
                    site.spelling, site.kind = dotted(node) or "", "reference"
                    return site
            return None
        op, torch_name = O.lookup(q[0], self.facades)
        if op is None:
            return None
        site = _site(op, torch_name, "facade" if torch_name != q[0] else q[1], "resolved", None)
        site.spelling, site.kind = dotted(node) or "", "reference"
        return site

    def pg_attributes(self, cls: cst.ClassDef, parent: Scope) -> set[str]:
        """Attributes `self.X` assigned a ProcessGroup anywhere in the class's methods."""
        out: set[str] = set()
        for m in statements(cls.body):
            if not isinstance(m, cst.FunctionDef):
                continue
            scope, _ = self.function_scope(m, parent)
            for s in self._simple_stmts(statements(m.body)):
                if not isinstance(s, cst.Assign):
                    continue
                for t in s.targets:
                    tt = t.target
                    if isinstance(tt, cst.Attribute) and isinstance(tt.value, cst.Name) and tt.value.value == "self":
                        b = self._binding_for_value(s.value, scope)
                        if b is not None and (b.qual == PG or b.qual in O.PG_FACTORIES):
                            out.add(tt.attr.value)
        return out


def _target_names(t: cst.CSTNode) -> list[str]:
    if isinstance(t, cst.Name):
        return [t.value]
    if isinstance(t, (cst.Tuple, cst.List)):
        return [n for e in t.elements for n in _target_names(e.value)]
    if isinstance(t, cst.StarredElement):
        return _target_names(t.value)
    return []


def _site(op: O.Op, qual: str, via: str, certainty: str, call: cst.Call | None) -> CallSite:
    kws = [a.keyword.value for a in call.args if a.keyword is not None] if call is not None else []
    npos = sum(1 for a in call.args if a.keyword is None) if call is not None else 0
    spelling = (dotted(call.func) or "") if call is not None else ""
    return CallSite(
        op=op.name,
        qualname=qual,
        realization=op.realization,
        api=op.api,
        line=0,
        spelling=spelling,
        via=via,
        certainty=certainty,
        keywords=kws,
        n_args=npos,
        payload=op.payload,
        fused=op.fused,
    )
