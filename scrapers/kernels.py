"""Index of optimized multi-GPU kernels that libraries ship in CUDA C++ and Triton.

For each kernel: its name and line, which collective or fused pattern it implements (from its
name, its file path and its body), the transfer mechanism visible in its body (copy engine,
TMA / bulk copies, peer loads/stores, multimem, NVSHMEM, IPC handles) and the taxonomy families
it matches, so tasks and prompts can cite known optimized implementations of their pattern.
"""

from __future__ import annotations

import re

from mgbench.scrapers.classify import TaxonomyIds, match_families

_CANDIDATE = re.compile(
    rb"multimem|nvshmem|cudaIpc|IpcMemHandle|all_?reduce|all_?gather|reduce_?scatter|"
    rb"all_?to_?all|\.sys\b|symm_at|signal_pad|peer|cross_device|libshmem",
    re.I,
)
_CUDA_KERNEL = re.compile(r"__global__[^;{}]*?\bvoid\b\s*(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(")
_TRITON_DEF = re.compile(
    r"^([ \t]*)@(?:triton\.jit|jit|triton_dist\.jit|triton\.autotune)\b[^\n]*\n"
    r"(?:\1@[^\n]*\n|\1[ \t]+[^\n]*\n|\1\)[^\n]*\n)*\1def\s+(\w+)\s*\(",
    re.M,
)
PATTERNS = [  # (realization id, regex over name / path words)
    ("all_reduce", r"all_?reduce|cross_device_reduce|one_?shot|two_?shot|(?:^|_)ar(?:_|$)|allreduce"),
    ("reduce_scatter", r"reduce_?scatter|(?:^|_)rs(?:_|$)"),
    ("all_gather", r"all_?gather|(?:^|_)ag(?:_|$)"),
    ("all_to_all", r"all_?to_?all|a2a|dispatch|combine"),
    ("broadcast", r"broadcast|bcast"),
    ("send_recv", r"p2p|send_?recv|ring_(?:send|recv|shift)"),
]
FUSED = [("gemm", r"gemm|matmul|_mm(?:_|$)|gemv"), ("norm", r"norm"), ("moe", r"moe|expert|dispatch|combine")]
MECHANISMS = [
    ("multimem", r"multimem[._]|cuMulticast|multicast"),
    ("nvshmem", r"nvshmem\w*|putmem\w*|getmem\w*|libshmem_device|shmem_ptr"),
    (
        "tma_bulk",
        r"cp\.async\.bulk|cp_async_bulk|cuda::memcpy_async|CUtensorMap|\btma_\w+|SM90_TMA|"
        r"make_tensor_descriptor|_experimental_descriptor",
    ),
    ("copy_engine", r"cudaMemcpy\w*Async|cuMemcpy\w*Async|cudaMemcpyPeer|copy_engine"),
    ("ipc_handles", r"cudaIpc(?:Open|Get)MemHandle|cuMemImportFromShareableHandle|cuMemExportToShareableHandle"),
    (
        "peer_load_store",
        r"ld\.(?:volatile|acquire|relaxed)\.sys|st\.(?:volatile|release|relaxed)\.sys|"
        r"\bpeer_?(?:ptrs?|bufs?|buffers?|data)\b|buffer_ptrs|symm_at|signal_pad|\[peer\]|"
        r"\bptrs\[\w+\]|atomicAdd_system|__threadfence_system|red\.release\.sys|"
        r"ld\.global\.acquire\.sys",
    ),
]
_P = [(r, re.compile(rx, re.I)) for r, rx in PATTERNS]
_F = [(w, re.compile(rx, re.I)) for w, rx in FUSED]
_M = [(m, re.compile(rx)) for m, rx in MECHANISMS]


def _body_after(text: str, pos: int, limit: int = 200_000) -> str:
    """The brace-matched block starting at the first '{' after `pos` (declarations give '')."""
    start = text.find("{", pos)
    semi = text.find(";", pos)
    if start < 0 or (0 <= semi < start):
        return ""
    depth = 0
    for i in range(start, min(len(text), start + limit)):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return text[start : start + limit]


def _entry(
    name: str, line: int, lang: str, path: str, body: str, file_mechs: list[str], tax: TaxonomyIds | None
) -> dict | None:
    """A kernel is indexed when its name names a pattern or its own body moves data between GPUs;
    the file name only labels kernels whose body shows such a mechanism."""
    fname = path.rsplit("/", 1)[-1]
    patterns = [r for r, rx in _P if rx.search(name)]
    mechs = [m for m, rx in _M if rx.search(body)]
    ev = [f"name:{name}"]
    if patterns and not mechs and file_mechs:
        mechs, ev = file_mechs, ev + ["mechanism from file"]
    elif not patterns:
        if not mechs:
            return None
        patterns = [r for r, rx in _P if rx.search(fname)]
        ev.append(f"path:{path}")
    if lang == "triton" and not patterns and not set(mechs) & {"nvshmem", "multimem", "peer_load_store"}:
        return None
    fused = next((w for w, rx in _F if rx.search(name)), None) or (
        next((w for w, rx in _F if rx.search(fname)), None) if patterns else None
    )
    if fused == "moe" and "all_to_all" not in patterns:
        patterns.append("all_to_all")
    workload = fused or "collective"
    fams = match_families(workload, set(patterns), set(), tax) if tax else []
    if not fams and tax and fused:
        fams = match_families("collective", set(patterns), set(), tax)
    return {
        "kernel": name,
        "line": line,
        "language": lang,
        "patterns": patterns,
        "fused": fused,
        "families": fams,
        "mechanisms": mechs,
        "evidence": ev + [f"mechanism:{m}" for m in mechs],
    }


def index_cuda(data: bytes, path: str, tax: TaxonomyIds | None = None) -> list[dict]:
    """Kernels (__global__ functions) of a CUDA / C++ source that move data between GPUs."""
    if not _CANDIDATE.search(data):
        return []
    text = data.decode("utf-8", errors="replace")
    file_mechs = [m for m, rx in _M if rx.search(text)]
    out = []
    for m in _CUDA_KERNEL.finditer(text):
        body = _body_after(text, m.end())
        if not body:
            continue
        e = _entry(m.group(1), text.count("\n", 0, m.start()) + 1, "cuda", path, body, file_mechs, tax)
        if e:
            out.append(e)
    return out


def index_triton(data: bytes, path: str, tax: TaxonomyIds | None = None) -> list[dict]:
    """@triton.jit kernels of a Python file that communicate (symmetric memory, NVSHMEM, peers)."""
    if b"triton" not in data or not _CANDIDATE.search(data):
        return []
    text = data.decode("utf-8", errors="replace")
    file_mechs = [m for m, rx in _M if rx.search(text)]
    out = []
    for m in _TRITON_DEF.finditer(text):
        indent = len(m.group(1))
        lines = text[m.end() :].split("\n")
        body = [lines[0]]
        for ln in lines[1:]:
            if ln.strip() and (len(ln) - len(ln.lstrip())) <= indent:
                break
            body.append(ln)
        line = text.count("\n", 0, m.start(2)) + 1
        e = _entry(m.group(2), line, "triton", path, "\n".join(body), file_mechs, tax)
        if e:
            out.append(e)
    return out
