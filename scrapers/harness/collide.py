"""Whether two prelude statements that bind the same name can both stay (inlining, issue 7).

The inliner flattens helpers of several repository files into one module, so two files binding the
same name used to stop the inlining ("name collision"). Many such pairs are harmless:
- two imports of one torch / standard-library object by different paths (`typing.Callable` and
  `collections.abc.Callable`, `torch.distributed._tensor.DTensor` and `torch.distributed.tensor.DTensor`);
- an `if TYPE_CHECKING:` import, which binds nothing when the module runs;
- optional-dependency flags: `try: import transformer_engine ... except ImportError: HAVE_TE = False`
  next to another such block or a literal default (`HAVE_TE = False`); every such block sets the flag
  the same way in one environment.
Only the standard library and torch are imported here to compare objects; repository code never is.
"""
from __future__ import annotations

import functools
import importlib
import re
import sys

import libcst as cst

_IMPORT = re.compile(r"import ([A-Za-z_][\w.]*)")
_NEVER = {"this", "antigravity", "idlelib", "turtle", "tkinter", "turtledemo"}   # import side effects
_MISSING = object()
_FLAG = re.compile(r"\bHAVE_\w+")
_OPTIONAL = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def verdict(name: str, old: str, new: str) -> str:
    """'same' (the new statement adds nothing), 'both' (emit it too; it binds `name` last) or
    'clash' (they disagree). `old`/`new` are statement keys: code, or `import a.b.c` for imports."""
    if old == new:
        return "same"
    if _type_checking(new):
        return "same"
    if _type_checking(old):
        return "both"
    if _kind(old) and _kind(old) == _kind(new):
        return "same"          # two loggers, two TypeVars: neither changes what the code computes
    a, b = _object(old), _object(new)
    if a is not _MISSING and b is not _MISSING:
        return "same" if _unalias(a) is _unalias(b) else "clash"
    if _optional(old, name) and _optional(new, name):
        return "both"
    if (_optional(old, name) and _imports_only(old, name, new)) or \
            (_optional(new, name) and _imports_only(new, name, old)):
        return "both"          # `import warnings` and a `try` block whose handler imports warnings
    return "clash"


def _unalias(obj: object) -> object:
    return getattr(obj, "__origin__", None) or obj      # typing.OrderedDict -> collections.OrderedDict


@functools.lru_cache(maxsize=4096)
def _parse(code: str) -> cst.BaseStatement | None:
    try:
        body = cst.parse_module(code).body
    except cst.ParserSyntaxError:
        return None
    return body[0] if len(body) == 1 else None


def _type_checking(code: str) -> bool:
    s = _parse(code) if code.startswith("if ") else None
    return isinstance(s, cst.If) and s.orelse is None and \
        cst.Module([]).code_for_node(s.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


@functools.lru_cache(maxsize=4096)
def _object(key: str) -> object:
    """The torch / standard-library object an import key names, else _MISSING (never imports others)."""
    m = _IMPORT.fullmatch(key)
    if not m:
        return _MISSING
    parts = m.group(1).split(".")
    if not (parts[0] == "torch" or parts[0] in sys.stdlib_module_names) or parts[0] in _NEVER:
        return _MISSING
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except Exception:                     # noqa: BLE001 - not a module at this depth
            continue
        try:
            for attr in parts[k:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return _MISSING
        return obj
    return _MISSING


def _kind(code: str) -> str:
    """'logger' or 'typevar' for `x = logging.getLogger(...)` / `T = TypeVar(...)`, else ''."""
    s = _parse(code) if not _IMPORT.fullmatch(code) else None
    if not (isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 and isinstance(s.body[0], cst.Assign)
            and isinstance(s.body[0].value, cst.Call)):
        return ""
    func = cst.Module([]).code_for_node(s.body[0].value.func).split(".")[-1].replace("_", "").lower()
    return {"getlogger": "logger", "typevar": "typevar"}.get(func, "")


def _optional(code: str, name: str) -> bool:
    """A literal default (`X = False`), a `try` block guarded by an import-error handler, or an `if`
    on an availability flag (`if HAVE_TE:`)."""
    if _IMPORT.fullmatch(code):
        return False
    s = _parse(code)
    if isinstance(s, cst.If):
        return bool(_FLAG.search(cst.Module([]).code_for_node(s.test)))
    if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 and isinstance(s.body[0], cst.Assign):
        v = s.body[0].value
        return isinstance(v, (cst.Name, cst.Integer, cst.SimpleString)) and \
            (not isinstance(v, cst.Name) or v.value in ("True", "False", "None"))
    if not isinstance(s, cst.Try):
        return False
    for h in s.handlers:
        if h.type is None:
            return True
        types = h.type.elements if isinstance(h.type, cst.Tuple) else [h.type]
        names = {cst.Module([]).code_for_node(t.value if isinstance(t, cst.BaseElement) else t).split(".")[-1] for t in types}
        if names & _OPTIONAL:
            return True
    return False


class _Binds(cst.CSTVisitor):
    """How a statement binds `name`: the import keys, and whether anything else binds it."""

    def __init__(self, name: str):
        self.name, self.keys, self.other = name, set(), False

    def visit_Import(self, node: cst.Import) -> bool:
        for a in node.names:
            full = cst.Module([]).code_for_node(a.name)
            local = a.asname.name.value if a.asname else full.split(".")[0]
            if local == self.name:
                self.keys.add(f"import {full if a.asname else full.split('.')[0]}")
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        mod = cst.Module([]).code_for_node(node.module) if node.module else ""
        for a in [] if isinstance(node.names, cst.ImportStar) else node.names:
            local = a.asname.name.value if a.asname else cst.Module([]).code_for_node(a.name)
            if local == self.name:
                self.keys.add(f"import {'.' * len(node.relative)}{mod}.{cst.Module([]).code_for_node(a.name)}")
        return False

    def visit_Name(self, node: cst.Name) -> None:
        pass

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self.other |= self.name in cst.Module([]).code_for_node(node.target).replace(",", " ").split()


def _imports_only(code: str, name: str, key: str) -> bool:
    """`code` binds `name` only by importing what import key `key` names."""
    s = _parse(code)
    if s is None or _IMPORT.fullmatch(key) is None:
        return False
    v = _Binds(name)
    s.visit(v)
    return not v.other and all(k == key or _same(k, key) for k in v.keys)


def _same(a: str, b: str) -> bool:
    x, y = _object(a), _object(b)
    return x is not _MISSING and _unalias(x) is _unalias(y)
