"""Call sites of candidates in their repositories' checkouts, precomputed into `evidence.jsonl`.

The machine that runs the full harness pass has no checkouts, so what the callers of an entry pass (a
literal, `torch.bfloat16`, a tensor built by `torch.randn(b, s, h)` or `.view(...)`, a lambda, split sizes
computed from token counts) is read here, once, and stored per candidate id next to `inline.jsonl`:

    {"id": ..., "params": {name: [clue, ...]}, "sites": k, "file_bf16": bool, "callers": [...]}

`callers` (when any) are the test functions that call the entry: {path, class, function, line}, the units
a capture run executes to record the arguments they really pass (capture/).

Build it with `python -m mgbench.scrapers.harness.inputs.discovery.callsites --out SCRAPE --src SRC` (SRC/<name>
checkouts, as for `scrape harness --src`). Checkout files are only parsed (ast); nothing is imported or executed.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mgbench.scrapers.harness.inputs.discovery.cases import DTYPES
from mgbench.scrapers.harness.inputs.discovery.evidence import SPLIT_WORDS, Clue, EvidenceError
from mgbench.scrapers.harness.make.checkout import checkout, selected

EVIDENCE = "evidence.jsonl"
CONSTRUCTORS = frozenset("randn rand empty zeros ones full randint randperm normal".split())
RESHAPES = frozenset({"view", "reshape", "expand", "new_empty", "new_zeros", "new_ones"})
DTYPE_METHODS = {"bfloat16": "bfloat16", "half": "float16", "float": "float32", "double": "float64", "long": "int64"}
GENERIC_METHODS = frozenset("forward backward apply step update reset run init setup main call get set".split())
MAX_FILE_BYTES = 1_500_000
MAX_SITES = 20  # call sites read per candidate
MAX_CALLERS = 4  # test functions kept per candidate as callers to run (scrapers/harness/inputs/discovery/capture)


ALIASES = {"float": "float32", "double": "float64", "half": "float16", "long": "int64", "int": "int32"}


def _dtype(node: ast.AST | None) -> str | None:
    """`torch.bfloat16` -> "bfloat16" (aliases by their canonical name: `torch.long` -> "int64")."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return ALIASES.get(node.attr, node.attr) if node.attr in DTYPES else None
    return None


def _shape_len(args: list[ast.expr]) -> int | None:
    """The rank of a size given as `*args` of a constructor (`randn(b, s, h)` or `randn((b, s, h))`)."""
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        return len(args[0].elts) if not any(isinstance(e, ast.Starred) for e in args[0].elts) else None
    if any(isinstance(a, ast.Starred) for a in args):
        return None
    if len(args) == 1 and isinstance(args[0], ast.Attribute) and args[0].attr == "shape":
        return None
    return len(args) or None


def _nesting(node: ast.AST) -> int:
    d = 0
    while isinstance(node, (ast.List, ast.Tuple)) and node.elts:
        d, node = d + 1, node.elts[0]
    return d


def tensor_clue(node: ast.expr, source: str) -> Clue | None:
    """A tensor built by a torch constructor, `torch.tensor([...])`, `.view(...)`, with its dtype."""
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    kw = {k.arg: k.value for k in node.keywords}
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if isinstance(f, ast.Attribute) and name in DTYPE_METHODS and not node.args:
        inner = tensor_clue(f.value, source)
        return Clue("tensor", source, ndim=inner.ndim, dtype=DTYPE_METHODS[name]) if inner else None
    if isinstance(f, ast.Attribute) and name == "to" and node.args and _dtype(node.args[0]):
        inner = tensor_clue(f.value, source)
        return Clue("tensor", source, ndim=inner.ndim if inner else None, dtype=_dtype(node.args[0]))
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "torch":
        if name in CONSTRUCTORS:
            size = kw.get("size")
            args = (
                node.args[2:]
                if name == "randint" and len(node.args) > 2
                else node.args[:1]
                if name == "full"
                else node.args
            )
            ndim = _shape_len([size] if size is not None else args)
            dt = _dtype(kw.get("dtype")) or ("int64" if name in ("randint", "randperm") else None)
            return Clue("tensor", source, ndim=ndim, dtype=dt)
        if name == "tensor" and node.args:
            return Clue("tensor", source, ndim=_nesting(node.args[0]), dtype=_dtype(kw.get("dtype")))
        if name == "arange":
            return Clue("tensor", source, ndim=1, dtype=_dtype(kw.get("dtype")))
    if isinstance(f, ast.Attribute) and name in RESHAPES and node.args:
        return Clue("tensor", source, ndim=_shape_len(node.args))
    return None


def expr_clue(
    node: ast.expr, source: str, assigns: dict[str, ast.expr], defs: dict[str, int], depth: int = 0
) -> Clue | None:
    """What the argument expression `node` passed at a call site says about the parameter."""
    if isinstance(node, ast.Constant):
        v = node.value
        kind = {bool: "bool", int: "int", float: "float", str: "str"}.get(type(v))
        return Clue(kind, source, value=v) if kind else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        inner = expr_clue(node.operand, source, assigns, defs)
        return Clue(inner.kind, source, value=-inner.value) if inner and inner.kind in ("int", "float") else None
    if _dtype(node):
        return Clue("dtype", source, value=_dtype(node))
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ParallelMode":
        return Clue("mode", source, value=node.attr)
    if isinstance(node, ast.Lambda):
        return Clue("callable", source, arity=len(node.args.args))
    if (
        isinstance(node, (ast.List, ast.Tuple))
        and node.elts
        and all(isinstance(e, ast.Constant) and type(e.value) is int for e in node.elts)
    ):
        vals = [e.value for e in node.elts]
        return Clue("splits", source, value=vals, uneven=len(set(vals)) > 1)
    t = tensor_clue(node, source)
    if t:
        return t
    text = ast.unparse(node)
    if SPLIT_WORDS.search(text):
        return Clue("splits", source, uneven=True)
    if isinstance(node, ast.Name):
        if node.id in defs:
            return Clue("callable", source, arity=defs[node.id])
        if node.id in assigns and depth < 3:
            return expr_clue(assigns[node.id], source, assigns, defs, depth + 1)
    return None


def _imports(tree: ast.Module, here: str) -> dict[str, str]:
    """Local name -> the dotted origin of `import a.b as m` / `from a import b` / `from .a import b` in the
    file at repository path `here`."""
    out: dict[str, str] = {}
    package = Path(here).with_suffix("").parts[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1] if node.level else ())
            mod = ".".join(x for x in (base, node.module or "") if x) if node.level else node.module or ""
            for a in node.names:
                out[a.asname or a.name] = f"{mod}.{a.name}"
    return out


def _within(origin: str, module: str, name: str = "") -> bool:
    """`origin` (an import's dotted target) is the candidate's module, a package above it or a module beside
    it (a re-export), or, for a distinctive `name`, any module of the same top-level package."""
    if not origin:
        return False
    if module == origin or module.startswith(origin + "."):
        return True
    if origin.rpartition(".")[0] == module.rpartition(".")[0]:
        return True
    distinctive = len(name) >= 12 or name.count("_") >= 2
    return distinctive and origin.split(".")[0] == module.split(".")[0]


def _arity(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    return len(names) - (1 if names and names[0] in ("self", "cls") else 0)


def _functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _top_defs(tree: ast.Module) -> dict[int, tuple[str, str]]:
    """id(call) -> (class, function) of the top-level function or top-level class's method it lies in (the
    unit a capture run calls: scrapers/harness/inputs/discovery/capture)."""
    out: dict[int, tuple[str, str]] = {}
    units = [("", f) for f in tree.body if isinstance(f, ast.FunctionDef)] + [
        (c.name, f) for c in tree.body if isinstance(c, ast.ClassDef) for f in c.body if isinstance(f, ast.FunctionDef)
    ]
    for cls, fn in units:
        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                out[id(node)] = (cls, fn.name)
    return out


def _unit_want(cand_id: str, unit: dict[str, str]) -> Want:
    """A library unit that calls a candidate, as something a call (or a module's construction) names."""
    entry = f"{unit['class']}.{unit['function']}" if unit["class"] else unit["function"]
    kind = "method" if unit["class"] else "function"
    return Want(
        {"id": f"{cand_id}|{unit['path']}::{entry}", "provenance": {"path": unit["path"]}, "entry": entry, "kind": kind}
    )


def _tests_through_library(root: Path, cands: list[dict[str, Any]], found: dict[str, dict[str, Any]]) -> None:
    """Candidates no test calls directly get, as callers, the tests that call a library unit calling them
    (a test of `vocab_parallel_cross_entropy` reaches the autograd.Function it applies), in place."""
    wants = [_unit_want(c["id"], u) for c in cands if not found[c["id"]]["callers"] for u in found[c["id"]]["via"]]
    if not wants:
        return
    second = scan_repo(root, wants)
    for w in wants:
        cand_id, _, through = w.id.partition("|")
        callers = found[cand_id]["callers"]
        for c in second[w.id]["callers"]:
            before = len(callers)
            if before < MAX_CALLERS:
                _add_caller(callers, {k: c[k] for k in ("path", "class", "function")}, c["line"])
                if len(callers) > before:
                    callers[-1]["through"] = through


def _constructions(
    tree: ast.Module, modules: dict[str, list[Want]], tops: dict[int, tuple[str, str]]
) -> Iterator[tuple[ast.Call, Want]]:
    """Calls in test units that build a module whose `forward` is a candidate (`Linear1D_Row(...)`): the
    test then calls the module, which no call site names (`forward` is too generic a method name)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and id(node) in tops:
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            yield from ((node, w) for w in modules.get(name or "", ()))


def _add_caller(callers: list[dict[str, Any]], unit: dict[str, str], line: int) -> None:
    """Keep the test unit as a caller once (its first call site's line)."""
    if not any(all(c[k] == v for k, v in unit.items()) for c in callers):
        callers.append({**unit, "line": line})


def _assigns(fn: ast.AST) -> dict[str, ast.expr]:
    """Name -> the expression last assigned to it in the function (one name per target)."""
    out: dict[str, ast.expr] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out[node.target.id] = node.value
    return out


class Want:
    """The entry of one candidate as a call would name it."""

    def __init__(self, cand: dict[str, Any]) -> None:
        self.id = cand["id"]
        self.path = cand["provenance"]["path"]
        self.module = ".".join(Path(self.path).with_suffix("").parts)
        for root in ("src", "lib"):  # a src layout: `src/pkg/mod.py` is imported as `pkg.mod`
            self.module = self.module.removeprefix(root + ".")
        parts = cand["entry"].split(".")
        self.kind = cand["kind"]
        self.owner = parts[0] if len(parts) > 1 or self.kind == "autograd_function" else ""
        self.name = "apply" if self.kind == "autograd_function" else parts[-1]
        ps = [p for p in cand.get("params") or [] if p["kind"] not in ("vararg", "varkw")]
        if ps and ps[0]["name"] in ("self", "cls", "ctx"):
            ps = ps[1:]
        self.params = [p["name"] for p in ps]
        self.positional = [p["name"] for p in ps if p["kind"] != "kwonly"]

    def matches(self, call: ast.Call, imports: dict[str, str], here: str, text: str) -> bool:
        f = call.func
        if self.kind == "autograd_function":
            return isinstance(f, ast.Attribute) and f.attr == "apply" and getattr(f.value, "id", "") == self.owner
        if self.kind == "method":
            if not isinstance(f, ast.Attribute) or f.attr != self.name or self.name in GENERIC_METHODS:
                return False
            return here == self.path or (self.owner in text and ("_" in self.name or len(self.name) >= 10))
        if isinstance(f, ast.Name):
            origin = imports.get(f.id, "")
            return f.id == self.name and (
                here == self.path
                and not origin
                or origin.endswith("." + self.name)
                and _within(origin[: -len(self.name) - 1], self.module, self.name)
            )
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.attr == self.name:
            return _within(imports.get(f.value.id, ""), self.module)
        return False


def _role(path: str) -> str:
    p = Path(path)
    return "test" if "tests" in p.parts or "test" in p.parts or p.name.startswith("test_") else "call_site"


def scan_repo(root: Path, wants: list[Want]) -> dict[str, dict[str, Any]]:
    """Clues from every call site of the `wants` in the checkout `root` (files parsed once)."""
    by_name: dict[str, list[Want]] = defaultdict(list)
    for w in wants:
        by_name[w.name].append(w)
    modules: dict[str, list[Want]] = defaultdict(list)  # a class's name -> its `forward` candidates
    for w in wants:
        if w.kind == "method" and w.name == "forward" and w.owner:
            modules[w.owner].append(w)
    out: dict[str, dict[str, Any]] = {
        w.id: {"params": defaultdict(list), "sites": 0, "callers": [], "via": []} for w in wants
    }
    for f in sorted(root.rglob("*.py")):
        try:
            if f.stat().st_size > MAX_FILE_BYTES:
                continue
            text = f.read_text(errors="replace")
            if not any(n in text for n in by_name) and not any(n in text for n in modules):
                continue
            tree = ast.parse(text)
        except (OSError, SyntaxError, ValueError, RecursionError):
            continue
        rel = f.relative_to(root).as_posix()
        imports = _imports(tree, f.relative_to(root).as_posix())
        defs = {fn.name: _arity(fn) for fn in tree.body if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))}
        tops = _top_defs(tree)
        units = "callers" if _role(rel) == "test" else "via"  # a test runs; a library unit leads to tests
        for call, w in _constructions(tree, modules, tops) if modules else ():
            cls, function = tops[id(call)]
            if len(out[w.id][units]) < MAX_CALLERS:
                _add_caller(out[w.id][units], {"path": rel, "class": cls, "function": function}, call.lineno)
        for fn in _functions(tree):
            calls = [c for c in ast.walk(fn) if isinstance(c, ast.Call)]
            calls = [c for c in calls if (getattr(c.func, "id", None) or getattr(c.func, "attr", None)) in by_name]
            if not calls:
                continue
            assigns = _assigns(fn)
            for call in calls:
                name = getattr(call.func, "id", None) or call.func.attr
                for w in by_name[name]:
                    if fn.name == w.name and rel == w.path or not w.matches(call, imports, rel, text):
                        continue
                    rec = out[w.id]
                    if rec["sites"] >= MAX_SITES:
                        continue
                    rec["sites"] += 1
                    source = f"{_role(rel)} {rel}:{call.lineno}"
                    pairs = list(zip(w.positional, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg]
                    for pname, node in pairs:
                        if isinstance(node, ast.Starred) or pname not in w.params:
                            continue
                        clue = expr_clue(node, source, assigns, defs)
                        if clue:
                            rec["params"][pname].append(clue.to_dict())
                    if "torch.bfloat16" in text:
                        rec["caller_bf16"] = True
                    if id(call) in tops and len(rec[units]) < MAX_CALLERS:
                        cls, function = tops[id(call)]
                        _add_caller(rec[units], {"path": rel, "class": cls, "function": function}, call.lineno)
    return out


def build(scrape_dir: Path, src: Path, dest: Path | None = None) -> Path:
    """Scan every selected candidate's repository and write DEST (default SCRAPE/evidence.jsonl)."""
    dest = dest or scrape_dir / EVIDENCE
    cands = selected(scrape_dir)
    by_repo: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in cands:
        by_repo[c["provenance"]["repo"]].append(c)
    lines = []
    for repo, cs in sorted(by_repo.items()):
        root = checkout(src, repo)
        if root is None:
            print(f"{repo}: no checkout under {src}: no call-site evidence", file=sys.stderr)
            continue
        found = scan_repo(root, [Want(c) for c in cs])
        _tests_through_library(root, cs, found)
        for c in cs:
            rec = found[c["id"]]
            try:
                file_bf16 = "torch.bfloat16" in (root / c["provenance"]["path"]).read_text(errors="replace")
            except OSError:
                file_bf16 = False
            lines.append(
                {
                    "id": c["id"],
                    "params": {k: v for k, v in rec["params"].items()},
                    "sites": rec["sites"],
                    "file_bf16": file_bf16 or bool(rec.get("caller_bf16")),
                    **({"callers": rec["callers"]} if rec["callers"] else {}),
                }
            )
    dest.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in lines))
    return dest


def load(path: Path | str) -> dict[str, dict[str, Any]]:
    """Candidate id -> its evidence record; {} when the file does not exist. A malformed line raises
    EvidenceError naming the file, the line and the reason."""
    path = Path(path)
    if not path.exists():
        return {}
    out = {}
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise EvidenceError(f"{path} line {i}: not JSON ({e.msg})") from None
        why = _bad(rec)
        if why:
            raise EvidenceError(f"{path} line {i}: {why}")
        out[rec["id"]] = rec
    return out


def _bad(rec: Any) -> str:
    if not isinstance(rec, dict) or not isinstance(rec.get("id"), str):
        return "not an object with a string 'id'"
    params = rec.get("params", {})
    if not isinstance(params, dict):
        return "'params' is not an object"
    for name, clues in params.items():
        if not isinstance(clues, list) or not all(isinstance(c, dict) and "kind" in c and "source" in c for c in clues):
            return f"parameter {name!r}: clues must be objects with 'kind' and 'source'"
    return ""


def clues_of(rec: dict[str, Any] | None) -> dict[str, list[Clue]]:
    """The cached clues of one candidate as Clue objects."""
    return {k: [Clue.from_dict(c) for c in v] for k, v in ((rec or {}).get("params") or {}).items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="precompute call-site evidence of harness candidates")
    ap.add_argument("--out", required=True, help="scrape folder with candidates.jsonl")
    ap.add_argument("--src", required=True, help="folder of the repositories' checkouts (SRC/<name>)")
    ap.add_argument("--dest", help="output JSONL (default: OUT/evidence.jsonl)")
    args = ap.parse_args(argv)
    try:
        dest = build(Path(args.out), Path(args.src), Path(args.dest) if args.dest else None)
    except (OSError, EvidenceError) as e:
        print(f"callsites: {e}", file=sys.stderr)
        return 2
    n = sum(1 for _ in dest.open())
    print(f"wrote {dest} ({n} candidates)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
