"""What a module-level statement evaluates when it is defined (inlining, issue 7): decorators, defaults,
base classes, class bodies, assigned values; not function bodies. `gpu_call` tells whether such code
touches CUDA or Triton, ignoring strings and comments (docstrings, `device="cuda"` defaults)."""
from __future__ import annotations

import io
import re
import tokenize

import libcst as cst

from scrapers.cstwalk import statements

_GPU = re.compile(r"\bcuda\b(?!\.is_available|\.device_count)|\btriton\.jit\b")
_TEXT = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}


def gpu_call(code: str) -> bool:
    """CUDA/Triton named in the code itself (a string or comment mentioning `cuda` does not count)."""
    return bool(_GPU.search(_sans_text(code)))


def _sans_text(code: str) -> str:
    """The code with its strings and comments blanked out (positions kept)."""
    lines = code.splitlines(keepends=True)
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type in _TEXT]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return code
    for t in reversed(toks):
        (r0, c0), (r1, c1) = t.start, t.end
        if r0 == r1:
            lines[r0 - 1] = lines[r0 - 1][:c0] + " " * (c1 - c0) + lines[r0 - 1][c1:]
        else:
            lines[r0 - 1:r1] = [lines[r0 - 1][:c0] + "\n", *["\n"] * (r1 - r0 - 1), lines[r1 - 1][c1:]]
    return "".join(lines)


def load_time(stmt: cst.CSTNode) -> list[cst.CSTNode]:
    """The parts of a top-level statement evaluated when it is defined (not function bodies). One-line
    annotations are left out: a placeholder there is harmless or quoted by `annotations.quote_annotations`."""
    if isinstance(stmt, cst.FunctionDef):
        ps = stmt.params
        params = [*ps.posonly_params, *ps.params, *ps.kwonly_params] + [
            p for p in (ps.star_arg, ps.star_kwarg) if isinstance(p, cst.Param)]
        anns = [p.annotation.annotation for p in params if p.annotation] + \
            ([stmt.returns.annotation] if stmt.returns else [])
        return [d.decorator for d in stmt.decorators] + [p.default for p in params if p.default] + \
            [a for a in anns if _multiline(a)]
    if isinstance(stmt, cst.ClassDef):
        out: list[cst.CSTNode] = [d.decorator for d in stmt.decorators]
        out += [a.value for a in (*stmt.bases, *stmt.keywords) if not isinstance(a.value, cst.Name)]
        for s in statements(stmt.body):
            out += load_time(s)
        return out
    if isinstance(stmt, cst.SimpleStatementLine):
        return [x for small in stmt.body for x in load_time(small)]
    if isinstance(stmt, cst.AnnAssign):
        return ([stmt.value] if stmt.value else []) + ([stmt.annotation.annotation]
                                                       if _multiline(stmt.annotation.annotation) else [])
    return [stmt]


def _multiline(node: cst.CSTNode) -> bool:
    """Code over several lines (an annotation `quote_annotations` leaves as it is)."""
    return "\n" in cst.Module([]).code_for_node(node)
