"""Evidence written as text: shapes in the docstring's parameter descriptions and in `# [s, b, h]` comments
of the entry's source, model code (bf16) from the file's path, and `gather`, which collects every clue about
a candidate's parameters (cached call sites, annotations, these, and body usage: evidence.py).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from typing import Any

from mgbench.scrapers.harness.inputs.discovery.evidence import Clue, body_clues, entry_node

SHAPE_RE = re.compile(r"[\[(]\s*(\w+(?:\s*[*/+-]\s*\w+)*(?:\s*,\s*\w+(?:\s*[*/+-]\s*\w+)*){1,5})\s*,?\s*[\])]")
DIM_WORDS = frozenset(
    "s b h sq sk np hn hp d n l t e k v bs sl nh hd batch seq seqlen seq_len sequence hidden hidden_size heads "
    "num_heads head_dim tokens num_tokens ntokens vocab dim embed embedding experts num_experts topk channels "
    "width height length features in_features out_features mb micro_batch tp cp sp".split()
)
MODEL_DIRS = frozenset("model models modeling layers layer transformer attention moe mlp experts".split())

# ---- shape comments -----------------------------------------------------------------------------------------


def shape_rank(text: str) -> int | None:
    """The rank of the first shape written in `text` (`[s, b, h]`, `(batch, seq, hidden)`), else None. A
    bracket counts as a shape when it lists 2-6 dimension-like entries of which one is a known dimension word
    or all are short (`[sq, b, np, hn]`)."""
    for m in SHAPE_RE.finditer(text):
        dims = [d.strip() for d in m.group(1).split(",") if d.strip()]
        words = [re.split(r"\s*[*/+-]\s*", d)[0].lower() for d in dims]
        if any(w in DIM_WORDS for w in words) or all(len(w) <= 2 and not w.isdigit() for w in words):
            return len(dims)
    return None


def _doc_section(doc: str, name: str) -> str:
    """The docstring lines describing parameter `name` (its line and the more indented lines after it)."""
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if re.match(rf"\s*\**{re.escape(name)}\b\s*[:(]", line):
            indent = len(line) - len(line.lstrip())
            out = [line]
            for more in lines[i + 1 :]:
                if more.strip() and len(more) - len(more.lstrip()) <= indent:
                    break
                out.append(more)
            return "\n".join(out)
    return ""


def comment_clues(
    module_text: str, entry: str, kind: str, docstring: str | None, names: Iterable[str]
) -> dict[str, list[Clue]]:
    """Tensor ranks from the docstring's parameter descriptions and from `# [s, b, h]` comments on lines of
    the entry's source that name the parameter."""
    out: dict[str, list[Clue]] = {}
    names = list(names)
    for n in names:
        k = shape_rank(_doc_section(docstring or "", n).split(":", 1)[-1])
        if k:
            out.setdefault(n, []).append(Clue("tensor", "docstring", ndim=k))
    try:
        fn = entry_node(ast.parse(module_text), entry, kind)
    except SyntaxError:
        fn = None
    if fn is None:
        return out
    src = module_text.splitlines()[fn.lineno - 1 : fn.end_lineno]
    for line in src:
        code, sep, comment = line.partition("#")
        k = shape_rank(comment) if sep else None
        if not k:
            continue
        for n in names:
            if re.search(rf"\b{re.escape(n)}\b", code) or re.match(rf"\s*{re.escape(n)}\s*:", comment):
                out.setdefault(n, []).append(Clue("tensor", "shape_comment", ndim=k))
    return out


# ---- the file ---------------------------------------------------------------------------------------------


def model_code(path: str, text: str = "") -> str | None:
    """Why the candidate's floating tensors are bf16 ('path' for model code, 'bfloat16' for the dtype in
    its source), else None."""
    parts = [p.lower() for p in re.split(r"[/\\]", path)]
    stems = set(parts[:-1]) | {parts[-1].rsplit(".", 1)[0]} if parts else set()
    if stems & MODEL_DIRS:
        return "path"
    return "bfloat16" if "torch.bfloat16" in text or "torch.bf16" in text else None


def bf16_reason(cand: dict[str, Any], module_text: str | None) -> str | None:
    """Why the candidate's floating tensors are drawn bf16 (model code or bf16 in its file), else None."""
    why = model_code(cand.get("provenance", {}).get("path", ""), module_text or "")
    return why or ("file" if (cand.get("evidence") or {}).get("file_bf16") else None)


def gather(cand: dict[str, Any], module_text: str | None, names: list[str]) -> dict[str, list[Clue]]:
    """Every clue about parameters `names`: cached call sites (`cand["evidence"]`, see callsites.py), then
    the docstring and shape comments, then body usage."""
    out: dict[str, list[Clue]] = {}
    cached = (cand.get("evidence") or {}).get("params") or {}
    annotations = {p["name"]: p.get("annotation") or "" for p in cand.get("params") or []}
    for n in names:
        out[n] = [Clue.from_dict(c) for c in cached.get(n, [])]
        if re.search(r"\bParallelMode\b", annotations.get(n, "")):
            out[n].append(Clue("mode", "annotation"))
    found = [comment_clues(module_text or "", cand["entry"], cand["kind"], cand.get("docstring"), names)]
    if module_text:
        found.append(body_clues(module_text, cand["entry"], cand["kind"], names))
    for f in found:
        for n, cs in f.items():
            out.setdefault(n, []).extend(cs)
    return out
