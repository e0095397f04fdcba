"""Fast traversal helpers over libcst trees.

libcst's visitor protocol rebuilds every node it passes (about as costly as parsing); these helpers
walk only the syntactic fields (no whitespace, commas, parentheses) and are ~10x cheaper. Line
numbers come from one code-generation pass that records where chosen nodes start and end, much
cheaper than libcst's PositionProvider.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import libcst as cst
from libcst._nodes.internal import CodegenState

_SKIP = frozenset(
    {
        "colon",
        "comma",
        "default_indent",
        "default_newline",
        "dot",
        "empty_lines",
        "encoding",
        "equal",
        "first_colon",
        "first_line",
        "last_line",
        "footer",
        "has_trailing_newline",
        "header",
        "indent",
        "lbrace",
        "lbracket",
        "leading_lines",
        "leading_whitespace",
        "lines_after_decorators",
        "lpar",
        "newline",
        "operator",
        "posonly_ind",
        "rbrace",
        "rbracket",
        "rpar",
        "second_colon",
        "semicolon",
        "separator",
        "star",
        "trailing_comma",
        "trailing_whitespace",
        "relative",
        "asynchronous",
        "comment",
    }
)
_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(cls: type) -> tuple[str, ...]:
    f = _FIELDS.get(cls)
    if f is None:
        f = _FIELDS[cls] = tuple(
            x.name for x in dataclasses.fields(cls) if x.name not in _SKIP and not x.name.startswith("whitespace")
        )
    return f


def _all_subclasses(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        out.add(sub)
        out |= _all_subclasses(sub)
    return out


# exact-type tests: isinstance() on libcst's ABC-based classes is the walkers' main cost
NODE_TYPES = frozenset(_all_subclasses(cst.CSTNode))
_SEQ = (list, tuple)


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Syntactic children of `node` in source order."""
    out: list[cst.CSTNode] = []
    for name in child_fields(type(node)):
        v = getattr(node, name)
        t = type(v)
        if t in NODE_TYPES:
            out.append(v)
        elif t is list or t is tuple:
            out.extend(x for x in v if type(x) in NODE_TYPES)
    return out


def walk(node: cst.CSTNode, prune: tuple[type, ...] = ()) -> Iterator[cst.CSTNode]:
    """Pre-order walk; nodes of a `prune` type are yielded but not entered."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if prune and isinstance(n, prune) and n is not node:
            continue
        kids = children(n)
        kids.reverse()
        stack.extend(kids)


def dotted(expr: cst.BaseExpression) -> str | None:
    """'a.b.c' for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(expr, cst.Attribute):
        parts.append(expr.attr.value)
        expr = expr.value
    if isinstance(expr, cst.Name):
        parts.append(expr.value)
        return ".".join(reversed(parts))
    return None


def statements(body: cst.BaseSuite | cst.Module | list) -> list[cst.CSTNode]:
    """The statements of a suite (an indented block or a one-line `if x: y`)."""
    if isinstance(body, (list, tuple)):
        return list(body)
    inner = body.body
    return list(inner) if isinstance(inner, (list, tuple)) else [inner]


def nested_blocks(stmt: cst.CSTNode) -> list[list[cst.CSTNode]]:
    """Statement lists inside a compound statement that share its scope (if/try/for/while/with)."""
    out: list[list[cst.CSTNode]] = []
    if isinstance(stmt, (cst.If, cst.For, cst.While, cst.With, cst.Try, cst.TryStar)):
        out.append(statements(stmt.body))
        if isinstance(stmt, cst.If) and stmt.orelse is not None:
            orelse = stmt.orelse
            out.append([orelse] if isinstance(orelse, cst.If) else statements(orelse.body))
        elif getattr(stmt, "orelse", None) is not None:
            out.append(statements(stmt.orelse.body))
        for h in getattr(stmt, "handlers", ()):
            out.append(statements(h.body))
        if getattr(stmt, "finalbody", None) is not None:
            out.append(statements(stmt.finalbody.body))
    elif isinstance(stmt, cst.Match):
        out.extend(statements(c.body) for c in stmt.cases)
    return out


class _LineState(CodegenState):
    """Code generation that counts lines and records start/end lines of wanted nodes."""

    def __init__(self, module: cst.Module, wanted: set[int]):
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.line = 1
        self.wanted = wanted
        self.start: dict[int, int] = {}
        self.end: dict[int, int] = {}

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.line += value.count("\n")

    def pop_trailing_newline(self) -> None:
        if self.tokens and self.tokens[-1] == self.default_newline:
            self.tokens.pop()
            self.line -= self.default_newline.count("\n")

    def before_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self.wanted:
            self.start[id(node)] = self.line

    def after_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self.wanted:
            last = self.tokens[-1] if self.tokens else ""
            self.end[id(node)] = self.line - (1 if last.endswith("\n") else 0)


def node_lines(module: cst.Module, wanted: set[int]) -> tuple[dict[int, int], dict[int, int]]:
    """{id(node): first line}, {id(node): last line} for the wanted nodes (1-based)."""
    state = _LineState(module, wanted)
    module._codegen(state)
    return state.start, state.end


class StatementText:
    """Code of a module's top-level statements, generated one statement at a time and cached.

    `locate` gives absolute start/end lines of wanted nodes inside chosen statements by generating
    only those statements and finding their text in the source (libcst round-trips source
    exactly); it returns False when a statement cannot be found, and callers fall back to
    `node_lines` over the whole module."""

    def __init__(self, module: cst.Module, source: str | None):
        self.module, self.source = module, source
        self.codes: dict[int, str] = {}

    def code(self, idx: int) -> str:
        c = self.codes.get(idx)
        if c is None:
            c = self.codes[idx] = self.module.code_for_node(self.module.body[idx])
        return c

    def locate(self, indices: list[int], wanted: set[int]) -> tuple[dict[int, int], dict[int, int]] | None:
        if self.source is None:
            return None
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        cursor, line = 0, 1
        for idx in sorted(set(indices)):
            st = _LineState(self.module, wanted)
            self.module.body[idx]._codegen(st)
            code = "".join(st.tokens)
            self.codes[idx] = code
            pos = self.source.find(code, cursor)
            if pos < 0:
                return None
            line += self.source.count("\n", cursor, pos)
            cursor = pos + len(code)
            for k, v in st.start.items():
                start[k] = line + v - 1
            for k, v in st.end.items():
                end[k] = line + v - 1
            line += code.count("\n")
        return start, end
