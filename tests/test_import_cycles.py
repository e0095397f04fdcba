"""The import graph of the whole tree, read from the source (ast): no cycle anywhere, counting imports
inside functions and under TYPE_CHECKING too, and the harness's rooms import in one direction only."""

from __future__ import annotations

import ast
from pathlib import Path

from mgbench.paths import STAGES

ROOT = Path(__file__).resolve().parent.parent
# The harness's rooms, and the rooms each may import (scrapers/harness/__init__.py says why).
HARNESS = "mgbench.scrapers.harness"
ROOMS_MAY_IMPORT = {
    "make": set(),
    "run": {"make"},
    "inputs.discovery": {"make", "run"},
    "inputs": {"make", "run", "inputs.discovery"},
}


def _modules() -> dict[str, Path]:
    """Every module of the installed tree by its import name."""
    mods = {}
    for top in ("mgbench", *STAGES):
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join(parts if top == "mgbench" else ["mgbench", *parts])
            mods[name] = path
    return mods


MODULES = _modules()


def _known(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(name: str, path: Path) -> set[str]:
    """The tree's modules that `name` imports anywhere in its file (relative imports resolved)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        for target in targets:
            hit = _known(target)
            if hit and hit != name and not name.startswith(hit + "."):  # a package's own parents don't count
                found.add(hit)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        comp.append(top)
                        if top == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return out


def test_the_scan_sees_the_tree():
    assert len(MODULES) > 200
    assert "mgbench.validation.pool" in GRAPH["mgbench.validation.run"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_in_the_tree():
    assert _cycles(GRAPH) == []


def _room(name: str) -> str | None:
    if not name.startswith(HARNESS + "."):
        return None
    rest = name[len(HARNESS) + 1 :]
    return next((room for room in sorted(ROOMS_MAY_IMPORT, key=len, reverse=True) if rest.startswith(room)), None)


def test_the_harness_rooms_import_in_one_direction():
    wrong = [
        (name, target)
        for name, targets in GRAPH.items()
        if (room := _room(name))
        for target in targets
        if (other := _room(target)) and other != room and other not in ROOMS_MAY_IMPORT[room]
    ]
    assert wrong == []
