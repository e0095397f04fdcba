"""Splicing an inlined prelude into a candidate's module (the prelude comes from `inline.py`)."""

from __future__ import annotations

import ast
import re
from typing import Any

import libcst as cst

from mgbench.scrapers.closure import import_locals, is_import_line, prune_imports, used_and_bound
from mgbench.scrapers.harness.make.inline import InlineRecord


def apply(module_text: str, rec: dict[str, Any] | InlineRecord | None) -> str:
    """The candidate's module with the inlined names' imports dropped and the prelude before its first
    definition (or first use of an inlined name), after the leading imports and constants."""
    if rec is None:
        return module_text
    rec = rec if isinstance(rec, dict) else rec.to_dict()
    if not rec.get("names"):
        return module_text
    drop = set(rec["names"])
    mod = cst.parse_module(module_text)
    body: list[cst.CSTNode] = []
    cut = None  # the prelude goes before the first definition or use of an inlined name
    for s in mod.body:
        if is_import_line(s):
            keep = {n for small in s.body for n in import_locals(small)} - drop
            s = prune_imports(s, keep)
            if s is None:
                continue
        elif cut is None and (isinstance(s, (cst.FunctionDef, cst.ClassDef)) or used_and_bound(s)[0] & drop):
            cut = len(body)
        body.append(s)
    cut = len(body) if cut is None else cut
    head = module_text[: len(module_text) - len(mod.with_changes(header=[]).code)]
    first = mod.with_changes(body=body[:cut], header=[]).code if cut else ""
    rest = mod.with_changes(body=body[cut:], header=[]).code
    return head + first + "\n" + rec["prelude"] + "\n" + rest


GUARD_HEADER = "# (mgbench: module-level statements of the inlined helpers that fail here are skipped)"


def _cannot_fail(st: ast.stmt) -> bool:
    """A definition, an import, or a plain assignment of a literal (`LIMIT = 4`, `NAMES = ("a", "b")`)."""
    if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
        return True
    if (
        isinstance(st, (ast.Assign, ast.AnnAssign))
        and st.value is not None
        and all(isinstance(t, ast.Name) for t in (st.targets if isinstance(st, ast.Assign) else [st.target]))
    ):
        try:
            ast.literal_eval(st.value)
            return True
        except ValueError:
            return False
    return False


def tolerant(prelude: str) -> str:
    """The prelude with each other module-level statement wrapped in `try: ... except Exception: pass`: a
    platform check that raises when loaded (no `nvidia-smi` on this machine) leaves its names unbound instead
    of failing the whole module. Unchanged when nothing needs wrapping, when it does not parse, or when a
    statement to wrap holds a string over several lines (indenting would change it)."""
    try:
        tree = ast.parse(prelude)
    except SyntaxError:
        return prelude
    lines = re.split(r"(?<=\n)", prelude if prelude.endswith("\n") else prelude + "\n")  # ast's line breaks
    todo = [st for st in tree.body if not _cannot_fail(st)]
    if (
        not todo
        or any(
            isinstance(n, ast.Constant) and isinstance(n.value, str) and n.lineno != n.end_lineno
            for st in todo
            for n in ast.walk(st)
        )
        or any(st.col_offset for st in todo)
        or len({st.lineno for st in todo}) < len(todo)
    ):  # (`a = f(); b = g()` on one line)
        return prelude
    for st in reversed(todo):
        start, end = st.lineno - 1, st.end_lineno or st.lineno
        body = ["    " + ln if ln.strip() else ln for ln in lines[start:end]]
        lines[start:end] = ["try:\n", *body, "except Exception:\n", "    pass\n"]
    return GUARD_HEADER + "\n" + "".join(lines)
