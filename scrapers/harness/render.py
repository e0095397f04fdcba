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
from pathlib import Path
from typing import Any

from scrapers.harness.annotations import module_assigned, quote_annotations, type_checking_names
from scrapers.harness.optimfix import OPTIM_KINDS, OPTIM_PARAM_KINDS
from scrapers.harness.specedit import uses_kind

RUNTIME = Path(__file__).with_name("runtime.py")
FACADES = {"deepspeed.comm", "deepspeed.comm.comm", "deepspeed.comm.torch"}
STATE_NAMES = {"parallel_state", "mpu", "groups", "ps", "parallel_states", "mappings_state"}
NOOP_NAMES = {"print_rank_0", "print_rank_last", "log_single_rank", "dist_print", "warn_rank_0",
              "log_dist", "print_rank0", "nvtx_range_push", "nvtx_range_pop"}
DECORATORS = {"instrument_w_nvtx", "jit_fuser", "trace_fn", "parameterize", "clear_cache_before_run",
              "rerun_if_address_is_in_use", "rerun_on_exception", "nvtx_decorator", "nvtx_range",
              "skip_if_not_enough_gpus", "register_module", "no_torch_dynamo", "disable_compile"}
DECORATOR_FACTORIES = {"copy_signature"}  # `@f(source)`: typing only, the function as is
TRITON_MODULES = {"triton", "triton.language", "triton_dist", "triton_dist.language"}   # standin_triton.py
RESERVED = {"solution", "make_inputs", "SIZES", "oracle"}
SMOKE_N, FULL_N = 8, 1024
FULL_MAX_ELEMS = 1 << 26          # the largest input tensor of a full-size level-4 task (256 MiB in fp32)


class RenderReject(ValueError):
    """The candidate cannot become a task module (the message is the rejection reason)."""


@dataclass
class Prepared:
    """The candidate's code with imports rewritten, ready to take a harness."""
    body: str
    futures: list[str]
    stubbed: list[str] = field(default_factory=list)     # imports replaced by working stand-ins
    missing: list[str] = field(default_factory=list)     # imports replaced by failing placeholders
    standins: str = ""                                   # harness code the stand-ins need (Triton, numpy), not mined


def _root_ok(module: str) -> bool:
    root = module.split(".")[0]
    return root == "torch" or root in sys.stdlib_module_names


def stand_in(module: str, name: str | None) -> tuple[str, bool]:
    """(expression, works) replacing `from module import name` (or `import module` when name is None)."""
    full = f"{module}.{name}" if name else module
    last = (name or module).split(".")[-1]
    if full in FACADES:
        return "_mg_dist", True
    if last in STATE_NAMES or module.endswith(("parallel_state", ".mpu", "utils.groups")) and name is None:
        return "_MgParallelState()", True
    if module.endswith(("parallel_state", ".mpu", "utils.groups")):
        return f"_mg_ps_attr({name!r})", True
    special = _special(module, name, last)
    if special:
        return special, True
    if last == "get_accelerator":
        return "_MgAccelerator", True
    if last in ("get_pg_size", "get_tensor_model_parallel_world_size_from_group"):
        return "(lambda group=None: _mg_dist.get_world_size(group))", True
    if last == "get_pg_rank":
        return "(lambda group=None: _mg_dist.get_rank(group))", True
    if last in NOOP_NAMES:
        return "_mg_noop", True
    if last == "logger":
        return "__import__('logging').getLogger('mgbench.mined')", True
    if last in ("get_dist_logger", "get_logger"):        # ColossalAI: `logger = get_dist_logger(); logger.info(...)`
        return "(lambda *a, **k: _MgLogger())", True
    return f"_MgMissing({full!r})", False


def _special(module: str, name: str | None, last: str) -> str:
    """Stand-ins of common repository globals (runtime classes), or ''."""
    if last == "global_context" or last == "gpc" and "colossalai" in module:
        return "_MgGlobalContext()"
    if last == "ParallelMode":
        return "_MgEnum()"
    if last == "ProcessGroupCollection":
        return "_MgGroupCollection"
    if module in TRITON_MODULES and (name is None or module != "triton_dist" or name == "jit"):
        return f"_MgTriton({module!r})" + (f".{name}" if name else "")
    if module == "pytest" and name is None:
        return "_MgPytest()"
    if last == "Utils" and "test_utilities" in module:
        return "_MgTestUtils()"
    if last == "DistributedTest":
        return "_MgDistributedTest"
    if module == "deepspeed" and name is None:
        return "_MgDeepSpeed()"
    if last in DECORATORS:
        return "_mg_passthrough"
    if last in DECORATOR_FACTORIES:
        return "(lambda *a, **k: _mg_passthrough)"
    if module.endswith("registry") and name and name.isupper():
        return "_MgMarks()"
    if last == "get_args" and ("megatron" in module or module.endswith("global_vars")):
        return "(lambda *a, **k: args)"     # Megatron's global args: a module global the search synthesizes
    if last == "model_parallel_cuda_manual_seed":
        return "(lambda seed, *a, **k: _mg_torch.manual_seed(seed))"
    if last == "accelerator" and name and "colossalai" in module:
        return "_mg_types.SimpleNamespace(get_accelerator=_MgAccelerator, get_current_device=lambda: " \
               "_MgAccelerator().current_device())"
    if last == "get_current_device":
        return "(lambda *a: _MgAccelerator().current_device())"
    if module.endswith("model_parallel") and last == "initialize" or module.endswith("model_parallel.initialize") \
            and name is None:
        return "_MgParallelState()"
    if module.endswith("model_parallel.initialize"):
        return f"_mg_ps_attr({name!r})"
    return _version_stand_in(module, name, last)


def _version_stand_in(module: str, name: str | None, last: str) -> str:
    """Version helpers (packaging.version, torch version checks) on the running torch, or ''."""
    version = "_mg_types.SimpleNamespace(Version=_MgVersion, parse=_MgVersion)"
    if module == "packaging.version" and name is None or module == "packaging" and name == "version":
        return version
    if module == "packaging" and name is None:          # `import packaging.version` binds `packaging`
        return f"_mg_types.SimpleNamespace(version={version})"
    if module == "packaging.version" and last in ("Version", "parse"):
        return "_MgVersion"
    if last in ("is_torch_min_version", "torch_version_at_least"):
        return "_mg_torch_min_version"
    if last == "required_torch_version":
        return ("(lambda min_version=None, max_version=None: (min_version is None or _mg_torch_min_version("
                "min_version)) and (max_version is None or _MgVersion(_mg_torch.__version__) <= max_version))")
    if last == "get_torch_version":                     # Megatron: a Version
        return "(lambda *a: _MgVersion(_mg_torch.__version__))"
    if last == "torch_version":                         # fairscale: a tuple of ints
        return "(lambda *a: _MgVersion(_mg_torch.__version__).release)"
    return ""


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
    return bool(names & {"", "ImportError", "ModuleNotFoundError", "Exception", "(ImportError, ModuleNotFoundError)",
                         "(ModuleNotFoundError, ImportError)"}) or any("ImportError" in n for n in names)


def prepare(source: str, numpy: bool = False) -> Prepared:
    """Rewrite the imports of an extracted module; raise RenderReject when it cannot become a task. With
    `numpy`, `import numpy` (outside `try:`) gets the scalar stand-in of `standin_numpy.py`."""
    tree = ast.parse(source)
    lines = source.splitlines()
    edits: list[tuple[int, int, list[str]]] = []
    futures: list[str] = []
    prep = Prepared("", futures)
    placeholders: set[str] = set()
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))}
    if defined & RESERVED or any(n.startswith("_mg") for n in defined):
        raise RenderReject("defines a name of the task contract")

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
                visit(node.body, False, True)      # function-local imports get the same stand-ins
            elif isinstance(node, ast.ImportFrom) and node.module == "__future__":
                futures.append(ast.get_source_segment(source, node) or "")
                edits.append((node.lineno, node.end_lineno or node.lineno, []))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                rewrite(node, in_try, local)

    def rewrite(node: ast.Import | ast.ImportFrom, in_try: bool, local: bool) -> None:
        keep, new = [], []
        pad = " " * node.col_offset
        for bound, mod, name, alias in _bindings(node):
            if not mod.startswith(".") and _root_ok(mod):
                keep.append(alias)
                continue
            expr, works = stand_in(mod.lstrip("."), name)
            if numpy and mod == "numpy" and name is None:     # the scalar stand-in (asked for: see driver)
                expr, works = "_MgNumpy()", True
            works = works and not (in_try and expr.startswith(("_MgTriton(", "_MgNumpy(")))  # own fallback runs
            full = f"{mod}.{name}" if name else mod
            if not works and in_try:
                new.append(f"{pad}raise ImportError('mgbench-missing-import: {full}')")
                prep.missing.append(full)
                break
            (prep.stubbed if works else prep.missing).append(full)
            if not works and not local:         # module-level placeholders (annotations are quoted)
                placeholders.add(bound)
            new.append(f"{pad}{bound} = {expr}")
        if len(keep) == len(node.names):
            return
        if keep:
            node.names = keep
            new.insert(0, pad + ast.unparse(node))
        edits.append((node.lineno, node.end_lineno or node.lineno, new))

    visit(tree.body, False)
    lines = quote_annotations(source, tree, placeholders - module_assigned(tree),   # defs and classes included
                              type_checking_names(tree))
    for start, end, new in sorted(edits, reverse=True):
        lines[start - 1:end] = new
    body = "\n".join(l for l in lines if not (l.startswith("# ") and lines.index(l) < 4 and
                                              re.match(r"# (Extracted|Source|License)", l)))
    if re.search(r"\b(?:torch\.distributed|dist)\.nn\.", body) and "import torch.distributed.nn" not in body:
        body = "import torch.distributed.nn  # used as an attribute (imported elsewhere in the repository)\n" + body
    for stand, part in (("_MgTriton(", "triton"), ("_MgNumpy(", "numpy")):
        if stand in body:
            prep.standins += f"# ---- harness stand-in for {part} (synthesized, not mined) ----\n" + \
                _below_marker(f"standin_{part}.py") + "\n\n\n"
    prep.body = body.strip() + "\n"
    return prep


def runtime_source() -> str:
    """runtime.py without its docstring, then runtime_standins.py and runtime_cuda.py below their marker lines."""
    text = RUNTIME.read_text().split('"""', 2)[2].strip("\n")
    for part in ("runtime_standins.py", "runtime_cuda.py"):
        text += "\n\n\n" + _below_marker(part)
    return text + "\n"


def _below_marker(part: str) -> str:
    """A runtime part's source below its `from_runtime = None` marker line."""
    below = RUNTIME.with_name(part).read_text().split("from_runtime = None", 1)[1]
    return below.split("\n", 1)[1].strip("\n")


def _tensor_sizes(args: list[dict[str, Any]], n: int, ws: int) -> list[int]:
    """Element counts of every tensor a spec draws at size `n` on `ws` ranks (fields included), with the
    runtime's own evaluation of shape expressions."""
    from scrapers.harness.runtime import _mg_eval
    out = []
    for a in args:
        if a.get("kind") in ("tensor", "tensors", "module", *OPTIM_PARAM_KINDS):
            numel = math.prod(_mg_eval(d, n, ws, 0) for d in a.get("shape", ["n"]))
            count = a.get("count", "ws") if a["kind"] != "tensor" else "1"
            out += [numel] * max(1, _mg_eval(count, n, ws, 0)) * (2 if a.get("grads") else 1)
        out += _tensor_sizes([f for f in a.get("fields", []) if isinstance(f, dict)], n, ws)
    return out


def full_n(spec: dict[str, Any], ws: int = 8) -> int:
    """The full size: FULL_N halved until every input tensor fits FULL_MAX_ELEMS at world size `ws` (a
    4-D `[n, n, n, n]` input would be 4 TiB at n = 1024); never below twice the smoke size."""
    from scrapers.harness.runtime import _mg_state_attrs
    n = FULL_N
    sized = spec.get("args", []) + [a for _, a in _mg_state_attrs(spec)]
    while n > 2 * SMOKE_N and max(_tensor_sizes(sized, n, ws),   # other attributes stay at n_attr
                                  default=0) > FULL_MAX_ELEMS:
        n //= 2
    return n


def task_source(cand: dict[str, Any], prep: Prepared, spec: dict[str, Any], task_id: str = "",
                inlined: list[dict[str, Any]] | None = None) -> str:
    """The full task module of a candidate with harness `spec` (`inlined`: spans of inlined helpers)."""
    pv = cand["provenance"]
    spans = [f"#   {s['path']} lines {s['line_start']}-{s['line_end']} ({', '.join(s['names'])})" for s in inlined or []]
    head = [f"# mgbench level-4 task {task_id or cand['id']}, mined from {pv['repo']}@{pv['commit']}",
            f"#   {pv['path']} lines {pv['line_start']}-{pv['line_end']} ({cand['qualname']})",
            *(["# Repository helpers inlined from the same repository and commit:"] + spans if spans else []),
            f"# License: {pv['license']} - the mined code below keeps its original license. Original: {pv['url']}",
            "# Harness (make_inputs, solution, stand-ins for imports) synthesized by mgbench scrapers/harness;",
            "# level 4: no oracle, the mined code is the reference."]
    doc = json.dumps(f"Level-4 task mined from {pv['repo']}: {cand['qualname']} ({pv['path']}).")
    tail = f'''
# ---- harness (synthesized) ----
_MG_SPEC = {pprint.pformat(spec, width=100, sort_dicts=True)}

SIZES = {{"smoke": {{"n": {SMOKE_N}}}, "full": {{"n": {full_n(spec)}}}}}


def make_inputs(rank, world_size, *, seed, device, size="full"):
    """Inputs of one rank: random, deterministic in (seed, rank, world_size, size)."""
    return _mg_inputs(_MG_SPEC, rank, world_size, seed, device, SIZES[size]["n"])


def solution(*inputs):
    """The mined reference called with this rank's inputs (and the process groups it expects)."""
    return _mg_call(globals(), _MG_SPEC, inputs)
'''
    backward = f"# ---- harness: forward and backward of {spec['backward_of']} (synthesized) ----\n" \
        f"_MG_BACKWARD_OF = {spec['backward_of']!r}\n\n\n" + _below_marker("standin_backward.py") \
        if spec.get("backward_of") else ""
    optim = "# ---- harness: optimizer inputs (synthesized, not mined) ----\n" + \
        _below_marker("standin_optim.py") if uses_kind(spec, OPTIM_KINDS) else ""
    drain = "# ---- harness: wait for the call's outstanding communication (synthesized, not mined) ----\n" + \
        _below_marker("standin_drain.py") if spec.get("drain") else ""
    parts = ["\n".join(head), doc, *prep.futures, runtime_source(), optim, drain, prep.standins,
             "# ---- mined code (imports rewritten: " + (", ".join(prep.stubbed) or "none") + " stubbed; " +
             (", ".join(prep.missing) or "none") + " unavailable) ----", prep.body, backward, tail]
    return "\n".join(p.rstrip("\n") + "\n" for p in parts if p)
