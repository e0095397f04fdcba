"""What a pool worker does with one file: read, extract, classify, hash; or index kernels."""

from __future__ import annotations

from dataclasses import dataclass

from mgbench.scrapers.classify import TaxonomyIds, classify
from mgbench.scrapers.dedup import ast_hash
from mgbench.scrapers.extract import ExtractConfig, extract_source
from mgbench.scrapers.kernels import index_cuda, index_triton
from mgbench.scrapers.minhash import source_signature
from mgbench.scrapers.records import FileResult


@dataclass
class WorkerConfig:
    extract: ExtractConfig
    tax: TaxonomyIds
    kernels: bool = True


_CFG: WorkerConfig | None = None


def init(cfg: WorkerConfig) -> None:
    global _CFG
    _CFG = cfg


def process(task: tuple[str, str, str]) -> FileResult:
    """task = (kind 'py'|'kernel', absolute path, relative path)."""
    assert _CFG is not None, "worker not initialized"
    kind, path, rel = task
    try:
        with open(path, "rb") as f:
            data = f.read(_CFG.extract.max_bytes + 1)
    except OSError as e:
        return FileResult(rel, 0, "skipped", "unreadable", e.strerror or str(e))
    if kind == "kernel":
        res = FileResult(rel, len(data), "kernel")
        if _CFG.kernels and len(data) <= _CFG.extract.max_bytes and b"\0" not in data[:8192]:
            res.kernels = index_cuda(data, rel, _CFG.tax)
        return res
    res = extract_source(data, rel, _CFG.extract)
    lines = data.decode("utf-8", errors="replace").splitlines() if res.units else []
    for u in res.units:
        body = "\n".join(lines[max(0, u.line_start - 1) : u.line_end])
        cls = u.qualname.split(".")[0] if u.kind == "method" else None
        name = u.qualname.split(".")[-1]
        u.classification = classify(name, cls, rel, [p.name for p in u.params], body, u.calls, _CFG.tax)
        u.ast_hash = ast_hash(u.module_source)
        u.minhash = source_signature(u.module_source)
    if _CFG.kernels and res.status != "skipped" and b"triton" in data:
        res.kernels = index_triton(data, rel, _CFG.tax)
    return res
