"""Entry functions that communicate through same-module helpers (relays).

A benchmark problem's `solution` often calls no collective itself: it prepares tensors and calls
`_all_to_all(...)`, a `RingComm` object or an `autograd.Function` of the same file, which do. Such a
function is a unit too, when it is an entry of its module: a top-level function that no other function
or class of the module refers to, and that reaches, through the module-level functions and classes it
names (transitively), one whose code calls a collective. Pytest functions (`test*`) are no entries
(their parameters are fixtures) and do not make what they call a non-entry. Its call sites are those
of the helpers it reaches, each marked with the helper it lives in (`CallSite.through`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import libcst as cst

from mgbench.scrapers.closure import free_names
from mgbench.scrapers.records import CallSite


@dataclass
class Relay:
    """A relay entry: its top-level index and def, and the communicating helpers it reaches (sorted)."""

    index: int
    node: cst.FunctionDef
    through: list[str]


def _owner(kind: str, node: cst.CSTNode, cls: cst.ClassDef | None) -> str:
    """The module-level name a unit belongs to: its function, its class, or its autograd.Function."""
    top = cls if kind == "method" and cls is not None else node
    return top.name.value  # type: ignore[attr-defined]


def relay_entries(units: list[tuple], found: list[tuple]) -> list[Relay]:
    """Relays among `units` ((index, kind, node, class) of every top-level def, extract._top_units) given
    `found` ((index, kind, node, class, sites) of the units that call collectives themselves)."""
    communicating = {_owner(k, n, c) for _, k, n, c, _ in found}
    defs: dict[str, list[cst.CSTNode]] = {}  # module-level name -> the functions / classes binding it
    for _, kind, node, cls in units:
        top = cls if kind == "method" else node
        defs.setdefault(top.name.value, [])
        if not any(t is top for t in defs[top.name.value]):
            defs[top.name.value].append(top)
    names = {}  # name -> the other module-level defs it names
    for name, tops in defs.items():
        names[name] = set().union(*(free_names(t) for t in tops)) & (defs.keys() - {name})
    referenced = set().union(set(), *(v for k, v in names.items() if not k.startswith("test")))
    out = []
    for idx, kind, node, _ in units:
        name = node.name.value
        if kind != "function" or name in communicating or name in referenced or name.startswith("test"):
            continue
        seen, todo = {name}, [name]
        while todo:
            for m in names.get(todo.pop(), ()):
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        through = sorted(seen & communicating)
        if through:
            out.append(Relay(idx, node, through))
    return out


def relay_sites(relay: Relay, found: list[tuple]) -> list[tuple[cst.CSTNode, CallSite]]:
    """The call sites of the helpers a relay reaches (copies marked with their helper), in helper order."""
    out = []
    for owner in relay.through:
        for _, kind, node, cls, sites in found:
            if _owner(kind, node, cls) == owner:
                out.extend((n, replace(site, through=owner)) for n, site in sites)
    return out
