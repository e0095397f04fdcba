"""Static checks of candidate source with libcst (a syntax tree with resolved import names, not regex).

libcst is imported lazily: without it `check_source` returns a report with available=False and a
message, and the evaluation goes on with the runtime checks alone. Rules (severity reject unless
noted): harness_import, dynamic_code, introspection, reflection (attribute names computed at run
time, which hide what the other rules look for), dispatch_override, monkeypatch, threads,
process_control, try_fallback (review at module level), reference_call, and forbid_collectives (only
for tasks that set it: torch.distributed data collectives on the hot path, i.e. in solution() and
what it calls). The runtime guard (mgbench.validation.eval.audit) backs the introspection rules up.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from mgbench import distops

HARNESS = ("validation", "generator", "dataset", "taxonomy", "templates", "scrapers", "tests", "conftest", "mgbench")
IMPORT_RULES = {
    "threads": (
        "threading",
        "_thread",
        "multiprocessing",
        "concurrent",
        "subprocess",
        "torch.multiprocessing",
        "asyncio",
    ),
    "dynamic_code": ("importlib", "runpy", "imp", "pkgutil"),
    "introspection": ("gc", "inspect", "ctypes", "_ctypes", "traceback"),
    "monkeypatch": ("unittest.mock", "mock"),
    "process_control": ("signal",),
}
CALL_RULES = {
    "dynamic_code": (
        "builtins.exec",
        "builtins.eval",
        "builtins.compile",
        "builtins.__import__",
        "builtins.globals",
        "builtins.vars",
    ),
    "introspection": (
        "sys._getframe",
        "sys.settrace",
        "sys.setprofile",
        "sys._current_frames",
        "sys.exc_info",
        "sys.exception",
        "sys.addaudithook",
        "threading.settrace",
        "threading.setprofile",
        "threading.settrace_all_threads",
        "threading.setprofile_all_threads",
        "torch._C._dynamo.eval_frame.set_eval_frame",
    ),
    "threads": ("os.fork", "os.forkpty", "os.system", "os.popen", "os.posix_spawn", "os.spawnv", "os.spawnl"),
    "process_control": ("os._exit", "os.kill", "os.killpg", "os.abort", "sys.exit", "builtins.exit", "builtins.quit"),
}
INTROSPECTION_ATTRS = (
    "__globals__",
    "f_back",
    "f_globals",
    "f_locals",
    "f_builtins",
    "gi_frame",
    "cr_frame",
    "ag_frame",
    "tb_frame",
    "__traceback__",
    "__builtins__",
    "__subclasses__",
    "__closure__",
    "__code__",
    "_getframe",
    "_current_frames",
    "_getframemodulename",
    "monitoring",
)
# getattr-like calls: (qualified name, index of the attribute-name argument; None: every argument)
REFLECTION_CALLS = {
    "builtins.getattr": 1,
    "builtins.hasattr": 1,
    "builtins.setattr": 1,
    "builtins.delattr": 1,
    "operator.attrgetter": None,
    "operator.methodcaller": 0,
    "inspect.getattr_static": 1,
}
REFLECTION_ATTRS = ("__getattribute__", "__dict__")  # reach attributes by a name given at run time
# Attribute names no literal getattr may name either (the last part of every banned call, sys.modules)
HIDDEN_NAMES = (
    frozenset(INTROSPECTION_ATTRS)
    | {
        "modules",
        "settrace",
        "setprofile",
        "exc_info",
        "_exit",
        "__import__",
        "exec",
        "eval",
        "compile",
        "globals",
        "vars",
        "set_eval_frame",
        "addaudithook",
        "get_objects",
        "get_referrers",
        "get_referents",
    }
    | set(REFLECTION_ATTRS)
)
LIBRARY_CALLS = (
    "torch.library.Library",
    "torch.library.impl",
    "torch.library.register_kernel",
    "torch.library._scoped_library",
)
SENSITIVE_OWNERS = (
    "time",
    "builtins",
    "math",
    "sys",
    "os",
    "gc",
    "threading",
    "torch",
    "torch.cuda",
    "torch.cuda.Event",
    "torch.cuda.Stream",
    "torch.distributed",
    "torch.Tensor",
    "torch._C",
    "torch._C.TensorBase",
    "torch.distributed.distributed_c10d",
    "torch.cuda.streams",
)
# torch.distributed calls that move tensors: what forbid_collectives forbids on the hot path
DATA_COLLECTIVES = frozenset(distops.tensor_calls())
REFERENCE_NAMES = ("oracle", "reference", "ref_solution", "reference_solution", "make_inputs")


@dataclass
class Finding:
    rule: str
    message: str
    line: int
    severity: str = "reject"  # reject | review

    def describe(self) -> str:
        return f"{self.message} (line {self.line}, rule {self.rule})"


@dataclass
class StaticReport:
    available: bool
    message: str = ""
    findings: list[Finding] = field(default_factory=list)

    def rejects(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "reject"]

    def reviews(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "review"]

    def to_dict(self) -> dict[str, Any]:
        return {"available": self.available, "message": self.message, "findings": [asdict(f) for f in self.findings]}


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def check_source(source: str, *, forbid_collectives: bool = False) -> StaticReport:
    """Static findings for a candidate's source; never imports or runs it."""
    try:
        import libcst as cst
        from libcst import metadata as md
    except ImportError:
        return StaticReport(
            False, "static checks skipped: libcst is not installed (pip install libcst); the runtime checks still apply"
        )
    try:
        wrapper = md.MetadataWrapper(cst.parse_module(source))
    except cst.ParserSyntaxError as e:
        # libcst names where its parser gave up (after an unclosed bracket: lines later); Python's
        # own parser (parsing only, nothing runs) names the line at fault, as the author sees it.
        import ast

        try:
            ast.parse(source)
        except SyntaxError as py:
            where = f"line {py.lineno}, column {py.offset}"
            return StaticReport(
                True, "syntax error", [Finding("syntax", f"does not parse: {py.msg} ({where})", py.lineno or 0)]
            )
        return StaticReport(
            True,
            "syntax error",
            [Finding("syntax", f"does not parse: {str(e).splitlines()[0]}", getattr(e, "raw_line", 0))],
        )
    a = _Analyzer(
        cst, wrapper.resolve(md.PositionProvider), wrapper.resolve(md.QualifiedNameProvider), forbid_collectives
    )
    a.run(wrapper.module)
    return StaticReport(True, "ok" if not a.findings else f"{len(a.findings)} finding(s)", a.findings)


class _Analyzer:
    """Walks the tree once, tracking the enclosing top-level function and try/except handlers."""

    def __init__(self, cst: Any, pos: Any, qnames: Any, forbid: bool):
        self.cst, self.pos, self.qn_map, self.forbid = cst, pos, qnames, forbid
        self.findings: list[Finding] = []
        self.defined: set[str] = set()
        self.calls_by_fn: dict[str, set[str]] = {}
        self.collectives: list[tuple[str, str, int]] = []  # (function, name, line)
        self.methods: dict[str, set[str]] = {}  # class -> method function keys
        self.called: set[int] = set()  # ids of Name nodes called directly

    # -- helpers -----------------------------------------------------------------------------
    def line(self, node: Any) -> int:
        try:
            return self.pos[node].start.line
        except KeyError:
            return 0

    def add(self, rule: str, msg: str, node: Any, severity: str = "reject") -> None:
        f = Finding(rule, msg, self.line(node), severity)
        if not any(g.rule == f.rule and g.line == f.line for g in self.findings):
            self.findings.append(f)

    def dotted(self, node: Any) -> str:
        c = self.cst
        if isinstance(node, c.Name):
            return node.value
        if isinstance(node, c.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr.value}" if base else ""
        return ""

    def names(self, node: Any) -> set[str]:
        got = self.qn_map.get(node)
        if got is not None and not isinstance(got, (set, frozenset)):
            got = got()  # lazily computed metadata
        out = {q.name for q in got} if got else set()
        d = self.dotted(node)
        return out | ({d} if d else set())

    # -- walk --------------------------------------------------------------------------------
    def run(self, module: Any) -> None:
        c = self.cst
        for stmt in module.body:
            if isinstance(stmt, (c.FunctionDef, c.ClassDef)):
                self.defined.add(stmt.name.value)
        self.walk(module, fn=None, cls=None)
        if self.forbid:
            hot = self.hot_path()
            for fn, name, line in self.collectives:
                if fn in hot:
                    self.findings.append(
                        Finding(
                            "forbid_collectives",
                            f"{name} on the hot path ({fn}); this task requires device-side communication",
                            line,
                        )
                    )

    def hot_path(self) -> set[str]:
        seen, todo = set(), ["solution"]
        while todo:
            f = todo.pop()
            if f in seen:
                continue
            seen.add(f)
            for callee in self.calls_by_fn.get(f, ()):
                todo += [callee, *self.methods.get(callee, ())]
        return seen

    def walk(self, node: Any, fn: str | None, cls: str | None) -> None:
        c = self.cst
        if isinstance(node, c.FunctionDef):
            key = node.name.value if fn is None and cls is None else f"{cls or fn}.{node.name.value}"
            if cls is not None and fn is None:
                self.methods.setdefault(cls, set()).add(key)
            fn = key if fn is None else fn
        elif isinstance(node, c.ClassDef) and fn is None:
            cls = node.name.value
        elif isinstance(node, (c.Import, c.ImportFrom)):
            self.on_import(node)
        elif isinstance(node, c.Call):
            self.on_call(node, fn, cls)
        elif isinstance(node, c.Attribute):
            if node.attr.value in INTROSPECTION_ATTRS or self.dotted(node) == "sys.modules":
                self.add(
                    "introspection",
                    f"accesses {self.dotted(node) or node.attr.value} (can reach the harness or the reference)",
                    node,
                )
            elif node.attr.value in REFLECTION_ATTRS and self.dotted(node.value) != "self":
                self.add(
                    "reflection",
                    f"accesses {self.dotted(node) or node.attr.value} (attributes reached "
                    "by names computed at run time)",
                    node,
                )
        elif isinstance(node, c.Name) and node.value in INTROSPECTION_ATTRS:
            self.add("introspection", f"uses {node.value} (can reach the harness or the reference)", node)
        elif (
            isinstance(node, c.Name)
            and id(node) not in self.called
            and any(n in REFLECTION_CALLS for n in self.names(node))
        ):
            self.add("reflection", f"passes {node.value} around (calls through an alias escape the checks)", node)
        elif isinstance(node, (c.AssignTarget, c.AugAssign, c.AnnAssign, c.Del)):
            self.on_target(node.target, node)
        elif isinstance(node, c.Try):
            self.on_try(node, fn)
        for child in node.children:
            self.walk(child, fn, cls)

    # -- rules -------------------------------------------------------------------------------
    def on_import(self, node: Any) -> None:
        c = self.cst
        mods = []
        if isinstance(node, c.Import):
            mods = [self.dotted(a.name) for a in node.names]
        else:
            base = self.dotted(node.module) if node.module is not None else ""
            mods = [base] if base else []
            if not isinstance(node.names, c.ImportStar):
                mods += [f"{base}.{self.dotted(a.name)}" for a in node.names] if base else []
        for m in mods:
            if _under(m, HARNESS) or m.startswith("mgbench_task"):
                self.add("harness_import", f"imports {m} (the harness and the reference are off limits)", node)
            for rule, prefixes in IMPORT_RULES.items():
                if _under(m, prefixes):
                    self.add(rule, f"imports {m}", node)
            for rule, targets in CALL_RULES.items():
                if m in targets or m.replace("builtins.", "", 1) in ("vars", "globals", "__import__"):
                    self.add(rule, f"imports {m}", node)
            if m.rsplit(".", 1)[-1] in INTROSPECTION_ATTRS or m == "sys.modules":
                self.add("introspection", f"imports {m}", node)

    def on_call(self, node: Any, fn: str | None, cls: str | None) -> None:
        c = self.cst
        names = self.names(node.func)
        self.called.add(id(node.func))
        for rule, targets in CALL_RULES.items():
            hit = next((n for n in names if n in targets), None)
            if hit:
                self.add(rule, f"calls {hit.removeprefix('builtins.')}()", node)
        self.on_reflection(node, names)
        if names & {"builtins.setattr", "builtins.delattr", "setattr", "delattr"} and node.args:
            owner = self.names(node.args[0].value)
            if any(o in SENSITIVE_OWNERS for o in owner):
                self.add("monkeypatch", f"setattr/delattr on {sorted(owner)[0]}", node)
        if isinstance(node.func, c.Name):
            name = node.func.value
            if name in REFERENCE_NAMES and name not in self.defined:
                self.add("reference_call", f"calls {name}() which this file does not define (the reference's?)", node)
            if fn is not None and name in self.defined:
                self.calls_by_fn.setdefault(fn, set()).add(name)
        elif isinstance(node.func, c.Attribute) and fn is not None:
            self.calls_by_fn.setdefault(fn, set()).add(f"{cls or fn}.{node.func.attr.value}")
            self.calls_by_fn[fn].add(f"{fn.split('.')[0]}.{node.func.attr.value}")
        for n in names:
            short = n.rsplit(".", 1)[-1]
            if (
                (n.startswith("torch.distributed.") and short in DATA_COLLECTIVES and "symmetric_memory" not in n)
                or n.startswith("torch.distributed._functional_collectives.")
                or n.startswith(("torch.ops.c10d", "torch.ops._c10d_functional"))
            ):
                self.collectives.append((fn or "<module>", n, self.line(node)))
                break

    def literal(self, node: Any) -> str | None:
        """The value of a plain or implicitly concatenated string literal, else None."""
        c = self.cst
        if isinstance(node, (c.SimpleString, c.ConcatenatedString)):
            v = node.evaluated_value
            return v if isinstance(v, str) else None
        return None

    def on_reflection(self, node: Any, names: set[str]) -> None:
        hit = next((n for n in names if n in REFLECTION_CALLS), None)
        if hit is None:
            if (
                names & set(LIBRARY_CALLS)
                and node.args
                and (self.literal(node.args[0].value) or "").split("::")[0] == "aten"
            ):
                lib = sorted(names & set(LIBRARY_CALLS))[0]
                self.add(
                    "dispatch_override",
                    f"{lib}() on the aten namespace (replaces kernels of PyTorch's own operators)",
                    node,
                )
            return
        pos = REFLECTION_CALLS[hit]
        args = [a for a in node.args if a.keyword is None and a.star == ""]
        picked = args if pos is None else args[pos : pos + 1]
        short = hit.removeprefix("builtins.")
        for a in picked:
            name = self.literal(a.value)
            if name is None:
                self.add(
                    "reflection",
                    f"{short}() with an attribute name computed at run time (names "
                    "must be literal so that the checks can see them)",
                    node,
                )
            elif name in HIDDEN_NAMES or name.split(".")[-1] in HIDDEN_NAMES:
                self.add("introspection", f"{short}(..., {name!r}) (can reach the harness or the reference)", node)

    def on_target(self, target: Any, node: Any) -> None:
        c = self.cst
        targets = target.elements if isinstance(target, (c.Tuple, c.List)) else [target]
        for t in targets:
            t = getattr(t, "value", t) if isinstance(t, c.Element) else t
            if isinstance(t, c.Attribute):
                owner = self.names(t.value)
                hit = next((o for o in owner if o in SENSITIVE_OWNERS), None)
                if hit:
                    self.add("monkeypatch", f"replaces {hit}.{t.attr.value}", node)
            elif isinstance(t, c.Subscript) and self.dotted(t.value) in ("sys.modules", "__builtins__"):
                self.add("monkeypatch", f"writes {self.dotted(t.value)}[...]", node)

    def on_try(self, node: Any, fn: str | None) -> None:
        c = self.cst
        for h in node.handlers:
            torch_calls, returns = [], False
            stack = [h.body]
            while stack:
                n = stack.pop()
                if isinstance(n, c.Call) and any(x.startswith("torch.") for x in self.names(n.func)):
                    torch_calls.append(n)
                if isinstance(n, c.Return) and n.value is not None:
                    returns = True
                stack.extend(n.children)
            if torch_calls or returns:
                where = f"in {fn}()" if fn else "at module level"
                self.add(
                    "try_fallback",
                    f"try/except {where} whose except branch computes a result "
                    "(falls back to PyTorch when the fast path fails)",
                    h,
                    "reject" if fn else "review",
                )
