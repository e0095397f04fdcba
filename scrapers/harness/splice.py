"""Splicing an inlined prelude into a candidate's module (the prelude comes from `inline.py`)."""
from __future__ import annotations

import ast
from typing import Any

import libcst as cst

from scrapers.closure import import_locals, is_import_line, prune_imports, used_and_bound
from scrapers.harness.inline import InlineRecord


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
    cut = None              # the prelude goes before the first definition or use of an inlined name
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
    head = module_text[:len(module_text) - len(mod.with_changes(header=[]).code)]
    first = mod.with_changes(body=body[:cut], header=[]).code if cut else ""
    rest = mod.with_changes(body=body[cut:], header=[]).code
    return head + first + "\n" + rec["prelude"] + "\n" + rest



GUARD_HEADER = "# (mgbench: module-level statements of the inlined helpers that fail here are skipped)"


def tolerant(prelude: str) -> str:
    """The prelude with each module-level statement that is not a definition or an import wrapped in
    `try: ... except Exception: pass`: a platform check that raises when loaded (no `nvidia-smi` on this
    machine) leaves its names unbound instead of failing the whole module. Unchanged if it does not parse."""
    try:
        tree = ast.parse(prelude)
    except SyntaxError:
        return prelude
    lines = prelude.splitlines(keepends=True)
    keep = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)
    for st in reversed(tree.body):
        if isinstance(st, keep) or st.col_offset or not any(
                isinstance(n, (ast.Call, ast.Raise, ast.Attribute, ast.Subscript)) for n in ast.walk(st)):
            continue                                        # (a literal assignment cannot fail)
        start = min([st.lineno] + [d.lineno for d in getattr(st, "decorator_list", [])]) - 1
        body = ["    " + ln if ln.strip() else ln for ln in lines[start:st.end_lineno]]
        lines[start:st.end_lineno] = ["try:\n", *body, "except Exception:\n", "    pass\n"]
    return GUARD_HEADER + "\n" + "".join(lines)
