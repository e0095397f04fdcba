"""Inline repository-local helpers into a candidate's module (the level-4 harness's make room).

A mined module imports repository code (`from megatron.core.utils import divide`); in a task module
such an import is a failing placeholder. `inline_candidate` finds each imported definition in the
candidate's checkout and, transitively, the module-level definitions, constants and repository
imports it needs, and returns them as a prelude with the file and line span of every inlined
statement (same repository, commit and license as the candidate). Imports of torch, the standard
library and names with a working stand-in stay imports (`render.prepare` rewrites them). A
dependency that is third-party or missing and used when the prelude is *defined* (decorator, base
class, constant), a GPU call at definition time, a name collision or a closure past `max_lines`
stops the inlining of that one import: its `_MgMissing` placeholder stays and the reason is recorded.
Checkout files are only parsed (libcst); nothing is imported or executed in this process.
"""

from __future__ import annotations

import copy
import importlib
import re
import sys
import types
import warnings
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import libcst as cst

from mgbench.scrapers.closure import import_locals, is_future, is_import_line, top_binds, used_and_bound
from mgbench.scrapers.cstwalk import children, dotted, statements
from mgbench.scrapers.harness.make.checkout import RepoFile, parse, repo_index
from mgbench.scrapers.harness.make.standins import stand_in
from mgbench.scrapers.resolve import Resolver, module_name_for

MAX_LINES = 400
MAX_CALLS = 150
_GPU = re.compile(r"\bcuda\b(?!\.is_available|\.device_count)|\btriton\.jit\b")


_FAILED: dict[str, dict[tuple[str, str | None], str]] = {}  # checkout -> (module, name) -> why not


class _Stop(Exception):
    """Inlining of the current import is impossible (the message is the reason)."""


@dataclass
class InlineRecord:
    """What was inlined into one candidate (stored with its harness result)."""

    prelude: str = ""
    names: list[str] = field(default_factory=list)  # candidate locals now defined by the prelude
    spans: list[dict[str, Any]] = field(default_factory=list)  # {path, line_start, line_end, names}
    skipped: dict[str, str] = field(default_factory=dict)  # candidate import -> why it stays missing
    lines: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _plain(module: str) -> bool:
    """torch or the standard library: the import stays as it is."""
    root = module.split(".")[0]
    return root == "torch" or root in sys.stdlib_module_names


def _key(code: str) -> str:
    """A statement's identity: its code without leading comments and blank lines."""
    lines = code.strip().splitlines()
    return "\n".join(lines[next((k for k, text in enumerate(lines) if not text.lstrip().startswith("#")), 0) :])


def import_key(module: str, name: str | None) -> str:
    """What an import binds: equal keys for torch.distributed and its facades (`deepspeed.comm`), and for
    one torch object imported under several paths (`torch.distributed.DeviceMesh` and
    `torch.distributed.device_mesh.DeviceMesh`), which are no name collision."""
    full = f"{module}.{name}" if name else module
    if full == "torch.distributed" or stand_in(module, name)[0] == "_mg_dist":
        return "import torch.distributed"
    if module.split(".")[0] == "torch" and (origin := torch_origin(full)):
        return f"import {origin}"
    return f"import {full}"


@lru_cache(maxsize=4096)
def torch_origin(full: str) -> str | None:
    """Where the torch class, function or module `full` is defined (`__module__.__qualname__` of the object
    in this process's torch), or None (not importable here, or a value without a defining place)."""
    module, _, name = full.rpartition(".")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated paths (torch.distributed._tensor) warn when imported
        try:
            obj = getattr(importlib.import_module(module), name) if module else importlib.import_module(full)
        except Exception:  # noqa: BLE001 - an import error of any kind: the spelled path stays the key
            try:
                obj = importlib.import_module(full)
            except Exception:  # noqa: BLE001
                return None
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    where, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if isinstance(obj, type) or callable(obj):
        return f"{where}.{qualname}" if isinstance(where, str) and isinstance(qualname, str) else None
    return None


def _load_time(stmt: cst.CSTNode) -> list[cst.CSTNode]:
    """The parts of a top-level statement evaluated when it is defined (not function bodies). One-line
    annotations are left out: a placeholder there is harmless or quoted by `annotations.quote_annotations`."""
    if isinstance(stmt, cst.FunctionDef):
        ps = stmt.params
        params = [*ps.posonly_params, *ps.params, *ps.kwonly_params] + [
            p for p in (ps.star_arg, ps.star_kwarg) if isinstance(p, cst.Param)
        ]
        anns = [p.annotation.annotation for p in params if p.annotation] + (
            [stmt.returns.annotation] if stmt.returns else []
        )
        return (
            [d.decorator for d in stmt.decorators]
            + [p.default for p in params if p.default]
            + [a for a in anns if _multiline(a)]
        )
    if isinstance(stmt, cst.ClassDef):
        out: list[cst.CSTNode] = [d.decorator for d in stmt.decorators]
        out += [a.value for a in (*stmt.bases, *stmt.keywords) if not isinstance(a.value, cst.Name)]
        for s in statements(stmt.body):
            out += _load_time(s)
        return out
    if isinstance(stmt, cst.SimpleStatementLine):
        return [x for small in stmt.body for x in _load_time(small)]
    if isinstance(stmt, cst.AnnAssign):
        return ([stmt.value] if stmt.value else []) + (
            [stmt.annotation.annotation] if _multiline(stmt.annotation.annotation) else []
        )
    return [stmt]


def _multiline(node: cst.CSTNode) -> bool:
    """Code over several lines (an annotation `quote_annotations` leaves as it is)."""
    return "\n" in cst.Module([]).code_for_node(node)


def _attrs_on(nodes: list[cst.CSTNode], local: str) -> set[str] | None:
    """Attribute names read on `local` (`local.X`); None when `local` is also used otherwise."""
    attrs: set[str] = set()
    stack = list(nodes)
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name) and n.value.value == local:
            attrs.add(n.attr.value)
            continue
        if isinstance(n, cst.Name) and n.value == local:
            return None
        stack.extend(children(n))
    return attrs


class _Inliner:
    """Prelude under construction; `snapshot`/`restore` undo a failed import."""

    def __init__(self, root: str, max_lines: int):
        self.root, self.index, self.max_lines = root, repo_index(root), max_lines
        self.files = set(self.index.values())
        self.here = ""  # the file whose imports are being resolved
        self.pieces: list[tuple[str, int, int, str, list[str]]] = []  # path, start, end, code, names
        self.bound: dict[str, str] = {}  # prelude/candidate name -> key of what binds it
        self.done: set[tuple[str, str]] = set()
        self.active: set[tuple[str, str]] = set()
        self.missing: set[str] = set()  # prelude names bound to failing placeholders
        self.lines = 0
        self.failed = _FAILED.setdefault(root, {})  # kept across `restore` and candidates: no retry
        self.calls = 0
        self.volatile = 0  # candidate-specific stops seen (line budget...): not cached

    def snapshot(self) -> dict[str, Any]:
        return {
            k: copy.copy(v)
            for k, v in vars(self).items()
            if k not in ("index", "files", "root", "failed", "calls", "volatile")
        }

    def restore(self, snap: dict[str, Any]) -> None:
        vars(self).update(snap)

    def own(self, why: str) -> _Stop:
        """A stop that depends on this candidate (what it inlined so far, how it uses a module): such
        failures are not cached for the checkout, or one large candidate would block a helper for all."""
        self.volatile += 1
        return _Stop(why)

    # ---- emission -------------------------------------------------------------------------
    def bind(self, name: str, key: str) -> bool:
        """Record that `name` is bound by `key`; False when it already is (same key)."""
        old = self.bound.get(name)
        if old is not None and old != key:
            raise self.own(f"name collision: {name} ({old[:60]!r} vs {key[:60]!r})")
        self.bound[name] = key
        return old is None

    def emit(self, path: str, start: int, end: int, code: str, names: list[str]) -> None:
        fresh = [self.bind(n, _key(code)) for n in names]
        if names and not any(fresh):
            return
        self.lines += code.count("\n") + 1
        if self.lines > self.max_lines:
            raise self.own(f"closure over {self.max_lines} lines")
        self.pieces.append((path, start, end, code, names))

    def canonical(self, module: str, name: str | None) -> tuple[str, str | None]:
        """Follow repository re-exports (`from .index_file import X` in a package) to the defining module."""
        for _ in range(6):
            f = parse(self.root, self.index[module]) if name and module in self.index else None
            idx = f.binders.get(name, []) if f else []
            s = f.module.body[idx[0]] if len(idx) == 1 else None
            if s is None or not is_import_line(s) or not isinstance(s.body[0], cst.ImportFrom):
                break
            small = s.body[0]
            alias = (
                next((a for a, local in zip(small.names, import_locals(small)) if local == name), None)
                if not isinstance(small.names, cst.ImportStar)
                else None
            )
            nxt = f.resolver.absolute(len(small.relative), dotted(small.module) if small.module else None)
            if alias is None or not nxt:
                break
            module, name = nxt, dotted(alias.name)
        return module, name

    def import_line(self, module: str, name: str | None, local: str, missing: bool) -> None:
        text = (f"from {module} import {name}" if name else f"import {module}") + (
            "" if local == (name or module) else f" as {local}"
        )
        if self.bind(local, import_key(*self.canonical(module, name))):
            self.pieces.append(("", 0, 0, text + "\n", [local]))
            self.lines += 1
        if missing:
            self.missing.add(local)

    # ---- resolution -------------------------------------------------------------------------
    def provide(self, rel: str, name: str) -> None:
        """Define `name` of repository file `rel` at the prelude's top level (with what it needs)."""
        key = (rel, name)
        if key in self.done or key in self.active:
            return
        f = parse(self.root, rel)
        if name not in f.binders:
            raise _Stop(f"{name} not defined in {rel}")
        self.calls += 1
        if self.calls > MAX_CALLS:
            raise self.own(f"more than {MAX_CALLS} definitions explored")
        self.active.add(key)
        body = list(f.module.body)
        need = f.need(name)
        if f.star and need.unresolved:
            raise _Stop(f"star import in {rel}")
        used = [body[i] for i in need.included]
        outer, self.here = self.here, rel
        for i in sorted(need.imports):
            for small in body[i].body:
                for alias, local in zip(
                    small.names if not isinstance(small.names, cst.ImportStar) else [], import_locals(small)
                ):
                    if local in need.imports[i]:
                        why = self.resolve_import(f, small, alias, local, used)
                        if why and local == name:
                            raise _Stop(why)
        self.here = outer
        for i in sorted(need.included):
            s = body[i]
            if is_future(s):
                continue
            loads = _load_time(s)
            late = set().union(*(used_and_bound(x)[0] for x in loads)) & self.missing if loads else set()
            if late:
                raise _Stop(f"{sorted(late)[0]} (unavailable) used at definition time in {rel}")
            if any(_GPU.search(f.module.code_for_node(x)) for x in loads):
                raise _Stop(f"GPU call at definition time in {rel}")
            code = f.module.code_for_node(s)
            self.emit(rel, *f.span(code), code, sorted(top_binds(s)))
        self.active.discard(key)
        self.done.add(key)

    def resolve_import(
        self,
        f: RepoFile,
        small: cst.Import | cst.ImportFrom,
        alias: cst.ImportAlias,
        local: str,
        used: list[cst.CSTNode],
    ) -> str:
        """Bind `local` (imported in file `f`): plain import, stand-in, inlined definition or placeholder."""
        if isinstance(small, cst.Import):
            module, name = dotted(alias.name) or "", None
            if alias.asname is None:
                module = module.split(".")[0]
        else:
            module = f.resolver.absolute(len(small.relative), dotted(small.module) if small.module else None) or ""
            name = dotted(alias.name)
        return self.bring(module, name, local, used)

    def bring(self, module: str, name: str | None, local: str, used: list[cst.CSTNode]) -> str:
        """Make `local` available; '' when it works, else why it stays a placeholder."""
        if not module or _plain(module) or stand_in(module, name)[1]:
            self.import_line(module, name, local, missing=not module)
            return "" if module else "unresolved relative import"
        why = self.failed.get((module, name), "")
        if not why:
            snap, volatile = self.snapshot(), self.volatile
            if module not in self.index:  # a script-style import: found relative to the importer
                self.volatile += 1
            try:
                self.inline(module, name, local, used)
                return ""
            except _Stop as e:
                self.restore(snap)
                why = str(e)
                if self.volatile == volatile:  # nothing candidate-specific under it: holds for every candidate
                    self.failed[(module, name)] = why
        try:
            self.import_line(module, name, local, missing=True)
        except _Stop as e:
            raise _Stop(f"{why}; {e}") from None
        return why

    def locate(self, module: str) -> str | None:
        """The file of `module`: the package index, else a script-style import (`from utils import x`,
        `from unit.common import y` in tests) relative to a folder above the importing file."""
        if module in self.index:
            return self.index[module]
        tail = module.replace(".", "/")
        parts = self.here.split("/")[:-1]
        for k in range(len(parts), -1, -1):
            for rel in (f"{'/'.join(parts[:k] + [tail])}.py", f"{'/'.join(parts[:k] + [tail])}/__init__.py"):
                if rel in self.files:
                    return rel
        return None

    def star_origin(self, rel: str, name: str, depth: int = 4) -> str | None:
        """The repository module that binds `name` for file `rel` through its `from M import *` lines."""
        f = parse(self.root, rel)
        for s in f.module.body if depth > 0 and f.star else []:
            for small in s.body if isinstance(s, cst.SimpleStatementLine) else []:
                if not (isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar)):
                    continue
                mod = f.resolver.absolute(len(small.relative), dotted(small.module) if small.module else None)
                sub = self.locate(mod) if mod else None  # script-style too (`from unit.simple_model import *`)
                if sub is None:
                    continue
                if name in parse(self.root, sub).binders and not name.startswith("_"):
                    return mod
                deeper = self.star_origin(sub, name, depth - 1)
                if deeper:
                    return deeper
        return None

    def inline(self, module: str, name: str | None, local: str, used: list[cst.CSTNode]) -> None:
        sub = f"{module}.{name}" if name else module
        rel, sub_rel = (self.locate(module) if name else None), self.locate(sub)
        if rel and name in parse(self.root, rel).binders:
            self.provide(rel, name)
            if local != name:
                self.emit("", 0, 0, f"{local} = {name}\n", [local])
            return
        origin = self.star_origin(rel, name) if rel and name and sub_rel is None else None
        if origin:  # re-exported by `from .layer import *` (ColossalAI legacy.nn)
            return self.inline(origin, name, local, used)
        if sub_rel is None:
            known = rel is not None or module.split(".")[0] in {m.split(".")[0] for m in self.index}
            raise _Stop(f"{sub} not found in the checkout" if known else "third-party")
        attrs = _attrs_on(used, local)
        self.volatile += 1  # what a whole-module import needs is the candidate's use
        if not attrs:
            raise _Stop(f"module {sub} used as a whole")
        for a in sorted(attrs):
            self.provide(sub_rel, a)
        fields = ", ".join(f"{a}={a}" for a in sorted(attrs))
        self.emit("", 0, 0, f"{local} = _mg_types.SimpleNamespace({fields})\n", [local])


def inline_candidate(
    cand: dict[str, Any], module_text: str, root: Path | str, max_lines: int = MAX_LINES
) -> InlineRecord:
    """The prelude of repository definitions the candidate's imports need (see the module doc)."""
    rec = InlineRecord()
    mod = cst.parse_module(module_text)
    name, is_pkg = module_name_for(cand["provenance"]["path"])
    rsv = Resolver(name, is_pkg)
    inl = _Inliner(str(root), max_lines)
    inl.here = cand["provenance"]["path"]
    wanted: list[tuple[str, str | None, str]] = []
    for s in mod.body:
        if not is_import_line(s):
            for n in top_binds(s):
                inl.bound[n] = _key(mod.code_for_node(s))
            continue
        for small in s.body:
            if isinstance(small.names, cst.ImportStar):
                continue
            for alias, local in zip(small.names, import_locals(small)):
                if isinstance(small, cst.Import):
                    module, nm = dotted(alias.name) or "", None
                    module = module if alias.asname is not None else module.split(".")[0]
                else:
                    module = rsv.absolute(len(small.relative), dotted(small.module) if small.module else None) or ""
                    nm = dotted(alias.name)
                if module and not _plain(module) and not stand_in(module, nm)[1]:
                    wanted.append((module, nm, local))
                else:
                    inl.bound[local] = import_key(*inl.canonical(module, nm))
    uses = [s for s in mod.body if not is_import_line(s)]
    wanted += [
        (origin, n, n)
        for n in cand.get("unresolved", [])
        if n not in inl.bound  # via `import *`
        and inl.here in inl.files
        and (origin := inl.star_origin(inl.here, n)) is not None
    ]
    for module, nm, local in wanted:
        before, inl.calls, snap = len(inl.pieces), 0, inl.snapshot()
        try:
            why = inl.bring(module, nm, local, uses)
        except _Stop as e:
            inl.restore(snap)
            why = str(e)
        if why:
            rec.skipped[f"{module}.{nm}" if nm else module] = why
            del inl.pieces[before:]  # the candidate keeps its own import (a placeholder)
        else:
            rec.names.append(local)
    return _finish(rec, inl)


def _finish(rec: InlineRecord, inl: _Inliner) -> InlineRecord:
    if not rec.names:
        return InlineRecord(skipped=rec.skipped)
    out = ["# ---- repository helpers inlined by mgbench (same repository, commit and license) ----"]
    for path, start, end, code, names in inl.pieces:
        if path:
            out.append(f"# inlined from {path} lines {start}-{end}")
            rec.spans.append({"path": path, "line_start": start, "line_end": end, "names": names})
        out.append(code.rstrip("\n"))
    out.append("# ---- end of inlined helpers ----")
    rec.prelude = "\n".join(out) + "\n"
    rec.lines = rec.prelude.count("\n")
    return rec
