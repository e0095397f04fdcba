"""Render a candidate + harness spec into a self-contained task module (torch + stdlib only).

Imports that a task cannot have are rewritten: torch.distributed facades to torch.distributed,
parallel-state modules to a stub whose groups are real gloo/NCCL groups, loggers to no-ops, and
anything else to a placeholder that fails when used (inside `try:` it raises ImportError, so the
module's own fallback runs)."""

from __future__ import annotations

import ast
import json
import math
import pprint
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from mgbench.scrapers.harness.make.annotations import module_assigned, quote_annotations, type_checking_names
from mgbench.scrapers.harness.make.reserved import Unrenamable, rename_reserved
from mgbench.scrapers.harness.make.runtime_parts import on_demand, runtime_source
from mgbench.scrapers.harness.make.specedit import TENSOR_ARG_KINDS, uses_kind
from mgbench.scrapers.harness.make.specs import OPTIM_KINDS, OPTIM_PARAM_KINDS
from mgbench.scrapers.harness.make.standins import stand_in

SMOKE_N, FULL_N = 8, 1024
FULL_MAX_ELEMS = 1 << 26  # the largest input tensor of a full-size level-4 task (256 MiB in fp32)


class RenderReject(ValueError):
    """The candidate cannot become a task module (the message is the rejection reason)."""


@dataclass
class Prepared:
    """The candidate's code with imports rewritten, ready to take a harness."""

    body: str
    futures: list[str]
    stubbed: list[str] = field(default_factory=list)  # imports replaced by working stand-ins
    missing: list[str] = field(default_factory=list)  # imports replaced by failing placeholders
    standins: str = ""  # harness code the stand-ins need (Triton, numpy), not mined
    renames: dict[str, str] = field(default_factory=dict)  # task-contract names renamed: old -> new


def _root_ok(module: str, keep: tuple[str, ...] = ()) -> bool:
    root = module.split(".")[0]
    return root == "torch" or root in sys.stdlib_module_names or root in keep


def _bindings(node: ast.Import | ast.ImportFrom) -> list[tuple[str, str, str | None, ast.alias]]:
    """(bound name, module, imported name) per alias."""
    out = []
    for a in node.names:
        if isinstance(node, ast.Import):
            bound = a.asname or a.name.split(".")[0]
            out.append((bound, a.name if a.asname else a.name.split(".")[0], None, a))
        else:
            mod = "." * node.level + (node.module or "")
            out.append((a.asname or a.name, mod, a.name, a))
    return out


def _catches_import(t: ast.Try) -> bool:
    names = {ast.unparse(h.type) if h.type else "" for h in t.handlers}
    return bool(
        names
        & {
            "",
            "ImportError",
            "ModuleNotFoundError",
            "Exception",
            "(ImportError, ModuleNotFoundError)",
            "(ModuleNotFoundError, ImportError)",
        }
    ) or any("ImportError" in n for n in names)


def prepare(source: str, numpy: bool = False, keep_roots: tuple[str, ...] = ()) -> Prepared:
    """Rewrite the imports of an extracted module; raise RenderReject when it cannot become a task. With
    `numpy`, `import numpy` (outside `try:`) gets the scalar stand-in of `runtime/standin_numpy.py`.
    `keep_roots`: third-party packages imported as they are (capture runs of test callers on a machine
    that has them; a task module never keeps any). Module-level names of the task contract (`solution`,
    `SIZES`, `_mg*`, ...) are renamed first (`reserved.rename_reserved`; `renames` says how: the entry is
    called by its new name)."""
    try:
        source, renames = rename_reserved(source)
    except Unrenamable as e:
        raise RenderReject(f"defines a name of the task contract that cannot be renamed: {e}") from None
    tree = ast.parse(source)
    lines = source.splitlines()
    edits: list[tuple[int, int, list[str]]] = []
    futures: list[str] = []
    prep = Prepared("", futures, renames=renames)
    placeholders: set[str] = set()

    def visit(body: list[ast.stmt], in_try: bool, local: bool = False) -> None:
        for node in body:
            if isinstance(node, ast.Try):
                visit(node.body, _catches_import(node), local)
                for h in node.handlers:
                    visit(h.body, False, local)
                visit(node.orelse, in_try, local)
                visit(node.finalbody, in_try, local)
            elif isinstance(node, (ast.If, ast.With, ast.For, ast.While)):
                visit(node.body, in_try, local)
                visit(getattr(node, "orelse", []), in_try, local)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(node.body, False, True)  # function-local imports get the same stand-ins
            elif isinstance(node, ast.ImportFrom) and node.module == "__future__":
                futures.append(ast.get_source_segment(source, node) or "")
                edits.append((node.lineno, node.end_lineno or node.lineno, []))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                rewrite(node, in_try, local)

    def rewrite(node: ast.Import | ast.ImportFrom, in_try: bool, local: bool) -> None:
        keep, new = [], []
        pad = " " * node.col_offset
        for bound, mod, name, alias in _bindings(node):
            if not mod.startswith(".") and _root_ok(mod, keep_roots):
                keep.append(alias)
                continue
            expr, works = stand_in(mod.lstrip("."), name)
            if numpy and mod == "numpy" and name is None:  # the scalar stand-in (asked for: see driver)
                expr, works = "_MgNumpy()", True
            works = works and not (in_try and expr.startswith(("_MgTriton(", "_MgNumpy(")))  # own fallback runs
            full = f"{mod}.{name}" if name else mod
            if not works and in_try:
                new.append(f"{pad}raise ImportError('mgbench-missing-import: {full}')")
                prep.missing.append(full)
                break
            (prep.stubbed if works else prep.missing).append(full)
            if not works and not local:  # module-level placeholders (annotations are quoted)
                placeholders.add(bound)
            new.append(f"{pad}{bound} = {expr}")
        if len(keep) == len(node.names):
            return
        if keep:
            node.names = keep
            new.insert(0, pad + ast.unparse(node))
        edits.append((node.lineno, node.end_lineno or node.lineno, new))

    visit(tree.body, False)
    lines = quote_annotations(
        source,
        tree,
        placeholders - module_assigned(tree),  # defs and classes included
        type_checking_names(tree),
    )
    for start, end, new in sorted(edits, reverse=True):
        lines[start - 1 : end] = new
    body = "\n".join(
        line
        for line in lines
        if not (line.startswith("# ") and lines.index(line) < 4 and re.match(r"# (Extracted|Source|License)", line))
    )
    if re.search(r"\b(?:torch\.distributed|dist)\.nn\.", body) and "import torch.distributed.nn" not in body:
        body = "import torch.distributed.nn  # used as an attribute (imported elsewhere in the repository)\n" + body
    for stand, part in (("_MgTriton(", "triton"), ("_MgNumpy(", "numpy")):
        if stand in body:
            prep.standins += on_demand(part) + "\n\n\n"
    prep.body = body.strip() + "\n"
    return prep


def _tensor_sizes(args: list[dict[str, Any]], n: int, ws: int) -> list[int]:
    """Element counts of every tensor a spec draws at size `n` on `ws` ranks (fields included), with the
    runtime's own evaluation of shape expressions."""
    from mgbench.scrapers.harness.make.runtime import _mg_eval

    out = []
    for a in args:
        if a.get("kind") in (*TENSOR_ARG_KINDS, *OPTIM_PARAM_KINDS):
            numel = math.prod(_mg_eval(d, n, ws, 0) for d in a.get("shape", ["n"]))
            count = a.get("count", "ws") if a["kind"] != "tensor" else "1"
            out += [numel] * max(1, _mg_eval(count, n, ws, 0)) * (2 if a.get("grads") else 1)
        out += _tensor_sizes([f for f in a.get("fields", []) if isinstance(f, dict)], n, ws)
    return out


def full_n(spec: dict[str, Any], ws: int = 8) -> int:
    """The full size: FULL_N halved until every input tensor fits FULL_MAX_ELEMS at world size `ws` (a
    4-D `[n, n, n, n]` input would be 4 TiB at n = 1024); never below twice the smoke size."""
    from mgbench.scrapers.harness.make.runtime import _mg_state_attrs

    n = FULL_N
    sized = spec.get("args", []) + [a for _, a in _mg_state_attrs(spec)]
    while (
        n > 2 * SMOKE_N
        and max(
            _tensor_sizes(sized, n, ws),  # other attributes stay at n_attr
            default=0,
        )
        > FULL_MAX_ELEMS
    ):
        n //= 2
    return n


def sizes_of(spec: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The task's SIZES: smoke, full (the settled spec's "n_full", by bytes per rank: scrapers/harness/run/settle.py;
    else `full_n`) and, when settled with one, the latency point "lat" ("n_lat")."""
    sizes = {"smoke": {"n": SMOKE_N}, "full": {"n": int(spec["n_full"]) if spec.get("n_full") else full_n(spec)}}
    if spec.get("n_lat"):
        sizes["lat"] = {"n": int(spec["n_lat"])}
    return sizes


def task_source(
    cand: dict[str, Any],
    prep: Prepared,
    spec: dict[str, Any],
    task_id: str = "",
    inlined: list[dict[str, Any]] | None = None,
) -> str:
    """The full task module of a candidate with harness `spec` (`inlined`: spans of inlined helpers)."""
    pv = cand["provenance"]
    spans = [
        f"#   {s['path']} lines {s['line_start']}-{s['line_end']} ({', '.join(s['names'])})" for s in inlined or []
    ]
    head = [
        f"# mgbench level-4 task {task_id or cand['id']}, mined from {pv['repo']}@{pv['commit']}",
        f"#   {pv['path']} lines {pv['line_start']}-{pv['line_end']} ({cand['qualname']})",
        *(["# Repository helpers inlined from the same repository and commit:"] + spans if spans else []),
        f"# License: {pv['license']} - the mined code below keeps its original license. Original: {pv['url']}",
        "# Harness (make_inputs, solution, stand-ins for imports) synthesized by mgbench scrapers/harness;",
        "# level 4: no oracle, the mined code is the reference.",
    ]
    doc = json.dumps(f"Level-4 task mined from {pv['repo']}: {cand['qualname']} ({pv['path']}).")
    tail = f'''
# ---- harness (synthesized) ----
_MG_SPEC = {pprint.pformat(spec, width=100, sort_dicts=True)}

SIZES = {json.dumps(sizes_of(spec))}


def make_inputs(rank, world_size, *, seed, device, size="full"):
    """Inputs of one rank: random, deterministic in (seed, rank, world_size, size)."""
    return _mg_inputs(_MG_SPEC, rank, world_size, seed, device, SIZES[size]["n"])


def solution(*inputs):
    """The mined reference called with this rank's inputs (and the process groups it expects)."""
    return _mg_call(globals(), _MG_SPEC, inputs)
'''
    backward = on_demand("backward", backward_of=spec["backward_of"]) if spec.get("backward_of") else ""
    optim = on_demand("optim") if uses_kind(spec, OPTIM_KINDS) else ""
    drain = on_demand("drain") if spec.get("drain") else ""
    parts = [
        "\n".join(head),
        doc,
        *prep.futures,
        runtime_source(),
        optim,
        drain,
        prep.standins,
        "# ---- mined code (imports rewritten: "
        + (", ".join(prep.stubbed) or "none")
        + " stubbed; "
        + (", ".join(prep.missing) or "none")
        + " unavailable) ----",
        prep.body,
        backward,
        tail,
    ]
    return "\n".join(p.rstrip("\n") + "\n" for p in parts if p)
