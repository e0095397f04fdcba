"""Object state read from a class's `__init__` source: `self.X = ...` assignments the harness can draw.

A method is called on a bare instance (its `__init__` is not run: it usually needs repository code the
task cannot have). When the method reads state, the attributes `__init__` would set are guessed here
from the source alone (nothing is imported or run): an `__init__` parameter (its default when it has a
literal one, except a world size above 1: `world_size=8` is the run's; else a guess from its name and
annotation), a literal, a fresh tensor (`torch.empty(a, b)`, `nn.Parameter(torch.zeros(...))`: its rank and
dtype), or the world size / rank of a group."""

from __future__ import annotations

import ast
import functools
import re
from typing import Any

from mgbench.scrapers.harness.inputs.discovery.cases import _NONE, DTYPES, _case_value
from mgbench.scrapers.harness.inputs.discovery.name_guess import REPLICATED_RE, guess_arg

_FACTORIES = {"empty", "zeros", "ones", "randn", "rand", "full"}
_BUILTIN_DTYPES = {"int": "int64", "float": "float64", "bool": "bool"}  # `dtype=int` is torch.int64
_ALIASES = {"long": "int64", "int": "int32", "float": "float32", "double": "float64", "half": "float16"}
_NONE_GUESSES = ("namespace", "group", "stream")  # a `None` default that is dereferenced: the guess


def _dotted(node: ast.AST) -> str:
    """`torch.nn.Parameter` -> "torch.nn.Parameter" (empty for anything else)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _literal(node: ast.AST) -> tuple[bool, Any]:
    """(True, value) for a scalar literal that survives the spec's JSON round trip (numbers but not
    infinities, strings, bools, None), else (False, None)."""
    v = _case_value(node)
    return (True, v) if v is not _NONE and (v is None or isinstance(v, (bool, int, float, str))) else (False, None)


def _dtype(node: ast.AST) -> str | None:
    dotted = _dotted(node)
    if dotted.startswith("torch.") and dotted.split(".")[-1] in DTYPES:
        return _ALIASES.get(dotted.split(".")[-1], dotted.split(".")[-1])
    return _BUILTIN_DTYPES.get(dotted)


def _tensor(name: str, call: ast.Call) -> dict[str, Any] | None:
    """A fresh tensor (`torch.empty(a, b, dtype=...)`, possibly wrapped in `Parameter(...)`)."""
    fn = _dotted(call.func)
    if fn.split(".")[-1] == "Parameter" and call.args and isinstance(call.args[0], ast.Call):
        return _tensor(name, call.args[0])
    if not (fn.startswith("torch.") and fn.split(".")[-1] in _FACTORIES) or not call.args:
        return None
    dims = call.args[:1] if fn.endswith(".full") else call.args
    if len(dims) == 1 and isinstance(dims[0], (ast.Tuple, ast.List)):
        dims = dims[0].elts
    if not dims or any(isinstance(d, ast.Starred) for d in dims) or len(dims) > 4:
        return None
    dtype = next((_dtype(k.value) for k in call.keywords if k.arg == "dtype"), None)
    shape = [
        str(d.value) if isinstance(d, ast.Constant) and type(d.value) is int and 1 <= d.value <= 8 else "n"
        for d in dims
    ]  # `torch.zeros(1)` keeps its size (a scalar accumulator)
    return {
        "name": name,
        "kind": "tensor",
        "shape": shape,
        "dtype": dtype or "float32",
        "replicated": bool(REPLICATED_RE.search(name.lower().lstrip("_"))),
    }


def _value(
    name: str, node: ast.AST, params: dict[str, ast.arg], defaults: dict[str, ast.AST], doc: str | None
) -> dict[str, Any] | None:
    """The spec of attribute `name` assigned `node` in `__init__`, when it can be drawn."""
    ok, v = _literal(node)
    if ok and not (type(v) in (int, float) and v == 0):  # a zero is a counter's start: drawn by its name
        return {"name": name, "kind": "const", "value": v}
    if ok:
        return None
    if isinstance(node, ast.IfExp):  # `Parameter(...) if bias else None`: the value over None
        a = _value(name, node.body, params, defaults, doc)
        b = _value(name, node.orelse, params, defaults, doc) if a is None or _is_none(a) else None
        return b if b is not None and (a is None or not _is_none(b)) else a
    if isinstance(node, ast.Name) and node.id in params:
        ann = params[node.id].annotation
        a = guess_arg(node.id, ast.unparse(ann) if ann is not None else None, doc)
        a["name"] = name
        ok, v = _literal(defaults[node.id]) if node.id in defaults else (False, None)
        if ok and type(v) is int and v > 1 and a.get("expr") == "ws":  # `world_size=8`: the run's; `tp_size=1` stays
            return a
        if ok and not (v is None and a["kind"] in _NONE_GUESSES):
            return {"name": name, "kind": "const", "value": v}
        if a["kind"] == "tensor":
            a["replicated"] = True  # module state (weights) is the same on every rank by default
        return a
    if isinstance(node, ast.List) and not node.elts:  # a list the object fills: fresh per call
        return {"name": name, "kind": "const", "value": []}
    if isinstance(node, ast.Call):
        return _query(name, node) or _tensor(name, node)
    return None


def _query(name: str, call: ast.Call) -> dict[str, Any] | None:
    """A group or device query: world size, rank, a parallel-state group getter, the device, a stream. A
    local rank in one parallel mode of several (`gpc.get_local_rank(ParallelMode.PARALLEL_2P5D_COL)`) is
    not the world rank: left to the name guess."""
    dotted = _dotted(call.func)
    fn, recv = dotted.split(".")[-1], dotted.rsplit(".", 1)[0].lower() if "." in dotted else ""
    group_recv = bool(re.search(r"group|(^|[._])pg($|_)", recv))
    if fn in ("get_world_size", "get_local_world_size") or fn == "size" and group_recv:
        return {"name": name, "kind": "int", "expr": "ws"}
    if fn == "get_rank" or fn == "get_local_rank" and not call.args or fn == "rank" and group_recv:
        return {"name": name, "kind": "int", "expr": "rank"}
    if re.fullmatch(r"get_\w*_(group|pg)", fn) and not call.args:
        return {"name": name, "kind": "group", "value": "world"}
    if dotted == "torch.device" or fn == "get_current_device":
        return {"name": name, "kind": "device"}
    if dotted in ("torch.cuda.Stream", "torch.cuda.current_stream"):
        return {"name": name, "kind": "stream"}
    if dotted == "torch.cuda.Event":
        return {"name": name, "kind": "event"}
    return None


def _base_name(node: ast.expr) -> str:
    """`Base`, `mod.Base`, `Base[T]` -> "Base"."""
    return _dotted(node.value if isinstance(node, ast.Subscript) else node).split(".")[-1]


@functools.lru_cache(maxsize=4)
def _class_table(text: str) -> dict[str, ast.ClassDef]:
    """Class name -> definition in `text` (parsed once per candidate: the search asks several questions of
    one text). Of two module-level classes of one name the later is the one bound at run time; nested
    classes count only where no module-level one has the name."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return {}
    classes: dict[str, ast.ClassDef] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.ClassDef):
            classes.setdefault(n.name, n)
    classes.update({n.name: n for n in tree.body if isinstance(n, ast.ClassDef)})
    return classes


def _chain(text: str, name: str) -> list[ast.ClassDef]:
    """The class and its bases defined in the same text (the module with its inlined helpers), nearest first."""
    classes = _class_table(text)
    out, todo = [], [name]
    while todo and len(out) < 6:
        c = classes.get(todo.pop(0))
        if c is not None and c not in out:
            out.append(c)
            todo += [_base_name(b) for b in c.bases]
    return out


def _methods(chain: list[ast.ClassDef]) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Methods by name over the class chain (the nearest class's wins)."""
    out: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for c in chain:
        for n in c.body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.setdefault(n.name, n)
    return out


def _self_name(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The instance parameter of a method (positional-only or not); None for a static method."""
    pos = fn.args.posonlyargs + fn.args.args
    static = any(_dotted(d) == "staticmethod" for d in fn.decorator_list)
    return pos[0].arg if pos and not static else None


def _body_nodes(fn: ast.AST) -> list[ast.AST]:
    """The nodes of a function body, breadth-first (the plain path before nested branches), without
    entering nested functions, lambdas or classes (their `self` and parameters are others)."""
    out, todo = [], list(ast.iter_child_nodes(fn))
    while todo:
        n = todo.pop(0)
        out.append(n)
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo += list(ast.iter_child_nodes(n))
    return out


def _from_init(
    cls: ast.ClassDef, init: ast.FunctionDef, own: set[str], used: set[str] | None, out: dict[str, dict[str, Any]]
) -> None:
    """Add to `out` the drawable attributes one class's `__init__` assigns (names already in `out`, set
    by a subclass, stay)."""
    me = _self_name(init)
    pos = init.args.posonlyargs + init.args.args
    params = {a.arg: a for a in pos[1:] + init.args.kwonlyargs}
    defaults = dict(zip([a.arg for a in pos][len(pos) - len(init.args.defaults) :], init.args.defaults))
    defaults.update({a.arg: d for a, d in zip(init.args.kwonlyargs, init.args.kw_defaults) if d is not None})
    doc = ast.get_docstring(cls) or ""
    mine: dict[str, dict[str, Any]] = {}
    for node in _body_nodes(init):
        targets, value = (
            (node.targets, node.value)
            if isinstance(node, ast.Assign)
            else ([node.target], node.value)
            if isinstance(node, ast.AnnAssign) and node.value
            else ([], None)
        )
        for t in targets:
            if (
                isinstance(t, ast.Attribute)
                and isinstance(t.value, ast.Name)
                and t.value.id == me
                and t.attr not in own
                and (used is None or t.attr in used)
            ):
                a = _value(t.attr, value, params, defaults, doc)
                if a is not None and (t.attr not in mine or _is_none(mine[t.attr])):
                    mine[t.attr] = a
    for k, a in mine.items():
        out.setdefault(k, a)


def _defined(chain: list[ast.ClassDef]) -> set[str]:
    return set(_methods(chain)) | {
        t.id for c in chain for n in c.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    }


def class_names(text: str, cls_name: str) -> set[str]:
    """Names the class and its bases in `text` define in their bodies (methods, properties, assigned class
    attributes; not bare annotations, which declare instance attributes): never set on an instance."""
    return _defined(_chain(text, cls_name))


def init_attrs(text: str, cls_name: str, used: set[str] | None = None) -> dict[str, dict[str, Any]]:
    """Attribute name -> spec, for the attributes the `__init__` of `cls_name` and of its bases defined in
    `text` assign and that can be drawn (a subclass's assignment wins over its base's, and in one
    `__init__` the plain path's over nested branches', a value over `None`); with `used`, only those
    names; never names the classes define (`class_names`)."""
    chain = _chain(text, cls_name)
    own = _defined(chain)
    out: dict[str, dict[str, Any]] = {}
    for c in chain:
        init = next((n for n in c.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is not None and _self_name(init):
            _from_init(c, init, own, used, out)
    return out


def used_attrs(text: str, entry: str) -> set[str]:
    """`self.X` names method `entry` (`Class.method`) reads (or updates in place), and those of the methods
    and properties of its class (and bases defined in `text`) it reaches through `self.name`."""
    cls_name, _, meth = entry.partition(".")
    methods = _methods(_chain(text, cls_name))
    todo, done, names = [meth], set(), set()
    while todo:
        fn = methods.get(todo.pop())
        me = _self_name(fn) if fn is not None else None
        if fn is None or fn.name in done or me is None:
            continue
        done.add(fn.name)
        nodes = _body_nodes(fn)
        updated = {id(n.target) for n in nodes if isinstance(n, ast.AugAssign)}
        for n in nodes:
            if (
                isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name)
                and n.value.id == me
                and (isinstance(n.ctx, ast.Load) or id(n) in updated)
            ):
                names.add(n.attr)
                todo.append(n.attr)
    return names


def _is_none(a: dict[str, Any]) -> bool:
    """A `None` state (`self.w = w` with `w=None`) gives way to a later assignment of a value."""
    return a["kind"] == "const" and a["value"] is None
