"""Records passed between scraper stages (all plain dataclasses, JSON-serializable with asdict)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA_VERSION = 1

# Reasons a file (or a whole source) is skipped; every skip is counted under one of these.
SKIP_REASONS = (
    "too_large",
    "binary",
    "generated",
    "undecodable",
    "python2",
    "syntax_error",
    "too_deep",
    "timeout",
    "worker_crash",
    "unreadable",
    "symlink",
    "symlink_loop",
    "special_file",
    "unsafe_path",
    "unreadable_archive",
    "missing_source",
)


@dataclass
class CallSite:
    """One resolved use of a torch.distributed communication op."""

    op: str  # canonical op name, e.g. all_gather_into_tensor
    qualname: str  # fully qualified callee, e.g. torch.distributed.all_gather_into_tensor
    realization: str | None  # taxonomy realization id (None for barrier)
    api: str  # c10d | functional | autograd | ops | symmetric_memory | cuda_nccl | process_group
    line: int
    spelling: str  # the callee as written, e.g. "dist.all_gather_into_tensor"
    via: str  # how the name resolved: import | assign | star | relative | facade | local_def | process_group
    certainty: str = "resolved"  # resolved | heuristic (process-group receivers known only by name)
    kind: str = "call"  # call | reference (op passed or stored without being called here)
    keywords: list[str] = field(default_factory=list)
    n_args: int = 0
    payload: str = "tensor"
    fused: str | None = None
    through: str | None = None  # for a relay (relays.py): the same-module helper holding the site


@dataclass
class Param:
    name: str
    kind: str  # positional | vararg | kwonly | varkw
    annotation: str | None = None
    default: str | None = None


@dataclass
class ImportRef:
    """An import the emitted module keeps, with where the imported code lives."""

    module: str  # absolute dotted module ('' never; relative ones resolved when possible)
    name: str | None  # imported name for `from m import name`, None for `import m`
    asname: str | None
    origin: str  # stdlib | torch | repo | third_party | unresolved_relative
    repo_path: str | None = None  # file in the same repository that defines it, when origin == repo


@dataclass
class Label:
    id: str
    confidence: float
    evidence: list[str] = field(default_factory=list)


@dataclass
class Classification:
    realizations: list[Label]
    dims: list[Label]
    workload: Label
    families: list[str]  # taxonomy family ids this unit matches (workload + realizations)
    confidence: float  # overall: min(workload, best dim, best realization)


@dataclass
class Unit:
    """One extracted function (or method / autograd.Function class) with its scope closure."""

    qualname: str  # e.g. "_reduce" or "RowParallelLinear.forward"
    entry: str  # name to call in the emitted module: function or class name
    kind: str  # function | method | autograd_function
    line_start: int
    line_end: int
    calls: list[CallSite]
    params: list[Param]
    returns: str | None
    docstring: str | None
    decorators: list[str]
    module_source: str  # the standalone module (imports + helpers + constants + unit)
    compiles: bool
    imports: list[ImportRef]
    helpers: list[str]  # module-level names pulled in by the closure
    unresolved: list[str]  # free names found nowhere in the file (star imports, injected globals)
    uses_globals: list[str]  # module-level mutable state the unit reads (e.g. _TP_GROUP)
    ast_hash: str = ""
    minhash: list[int] = field(default_factory=list)
    classification: Classification | None = None


@dataclass
class FileResult:
    path: str  # relative to the source root, POSIX
    size: int
    status: str  # ok | no_match | no_collectives | skipped
    skip_reason: str | None = None
    detail: str | None = None
    call_sites: int = 0
    module_level_calls: int = 0
    module_call_lines: list[int] = field(default_factory=list)  # lines of call sites outside units
    units: list[Unit] = field(default_factory=list)
    kernels: list[dict] = field(default_factory=list)  # KernelEntry fields without provenance


@dataclass
class Provenance:
    repo: str
    path: str
    commit: str | None
    line_start: int
    line_end: int
    license: str | None
    url: str | None


@dataclass
class Candidate:
    """One line of candidates.jsonl (see docs/scrapers.md for the field reference)."""

    id: str
    schema: int
    provenance: Provenance
    qualname: str
    entry: str
    kind: str
    module_path: str | None  # relative to the scrape output folder; None when not publishable
    compiles: bool
    params: list[Param]
    returns: str | None
    docstring: str | None
    decorators: list[str]
    calls: list[CallSite]
    imports: list[ImportRef]
    helpers: list[str]
    unresolved: list[str]
    uses_globals: list[str]
    classification: Classification | None
    ast_hash: str
    license_permitted: bool
    unique: bool  # representative of its duplicate cluster
    cluster: str  # id of the cluster representative
    duplicates: list[Provenance]  # other origins collapsed into this one (on representatives)
    lines: int = 0
    role: str = "library"  # library | test | benchmark | example (from the path)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class KernelEntry:
    """One optimized multi-GPU kernel shipped by a library (CUDA C++ or Triton)."""

    repo: str
    path: str
    commit: str | None
    license: str | None
    url: str | None
    language: str  # cuda | triton
    kernel: str
    line: int
    patterns: list[str]  # realization ids (all_reduce, all_gather, ...)
    fused: str | None  # fused compute workload (gemm, norm, moe...) or None
    families: list[str]  # taxonomy family ids
    mechanisms: list[str]  # copy_engine | tma_bulk | peer_load_store | multimem | nvshmem | ipc_handles
    evidence: list[str] = field(default_factory=list)


@dataclass
class Funnel:
    """Per-repository counts, in pipeline order."""

    repo: str
    commit: str | None = None
    license: str | None = None
    files_scanned: int = 0  # Python files looked at
    files_cached: int = 0  # files (any kind) whose previous results were reused
    bytes_scanned: int = 0
    files_prefiltered: int = 0  # passed the substring prefilter and were parsed
    files_with_collectives: int = 0
    call_sites: int = 0
    module_level_calls: int = 0  # call sites outside any function (not extractable)
    functions_extracted: int = 0
    unique: int = 0
    license_permitted: int = 0
    classified: int = 0
    kernel_files: int = 0
    kernels: int = 0
    seconds: float = 0.0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + n
