"""Splicing an inlined prelude into a candidate's module (the prelude comes from `inline.py`)."""
from __future__ import annotations

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

