"""Scan one source tree: walk it, fan files out to the worker pool, count the funnel."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mgbench.scrapers.classify import TaxonomyIds
from mgbench.scrapers.extract import ExtractConfig
from mgbench.scrapers.filecache import FileCache, file_digest, settings_salt
from mgbench.scrapers.pool import TaskFailed, TimeoutPool
from mgbench.scrapers.records import FileResult, Funnel, KernelEntry, Unit
from mgbench.scrapers.resolve import module_name_for
from mgbench.scrapers.tree import SourceTree, TreeFile, WalkSkip, walk
from mgbench.scrapers.worker import WorkerConfig, init, process

PARSE_SKIPS = {"python2", "syntax_error", "too_deep", "undecodable", "timeout", "worker_crash", "error"}


@dataclass
class ScanResult:
    tree: SourceTree
    funnel: Funnel
    units: list[tuple[str, Unit]] = field(default_factory=list)  # (path, unit)
    kernels: list[KernelEntry] = field(default_factory=list)
    skips: list[dict] = field(default_factory=list)  # {path, reason, detail}
    cpu_seconds: float = 0.0


def repo_modules(files: list[TreeFile]) -> dict[str, str]:
    """Dotted module name -> path for every Python file of the tree."""
    out: dict[str, str] = {}
    for f in files:
        if f.kind == "py":
            name, _ = module_name_for(f.rel)
            if name:
                out.setdefault(name, f.rel)
    return out


def scan_tree(
    tree: SourceTree,
    tax: TaxonomyIds,
    facades: dict[str, str] | None = None,
    processes: int = 2,
    timeout: float = 60.0,
    kernels: bool = True,
    progress: Callable[[str], None] | None = None,
    cache_path: Path | None = None,
) -> ScanResult:
    """Scan one tree; with `cache_path`, files unchanged since the last scan reuse its results."""
    t0 = time.monotonic()
    funnel = Funnel(repo=tree.repo, commit=tree.commit, license=tree.license)
    out = ScanResult(tree, funnel)
    files: list[TreeFile] = []
    for reason, n in tree.extra_skips.items():
        funnel.skip(reason, n)
    for x in walk(tree.root, kernels, tree.subdirs):
        if isinstance(x, WalkSkip):
            funnel.skip(x.reason)
            out.skips.append({"path": x.rel, "reason": x.reason, "detail": x.detail})
        else:
            files.append(x)
    mods = repo_modules(files)
    cfg = WorkerConfig(ExtractConfig(facades=dict(facades or {}), repo_modules=mods), tax, kernels)
    cache = FileCache(cache_path, settings_salt(cfg.extract.facades, mods, kernels, tax))
    sizes = {f.rel: f.size for f in files}
    digests = {f.rel: file_digest(f.path) for f in files}
    tasks = []
    for f in sorted(files, key=lambda f: -f.size):
        res = cache.get(f.rel, digests[f.rel])
        if res is None:
            tasks.append((f.kind, f.path, f.rel))
        else:
            _take(out, f.kind, f.rel, res, sizes)
    funnel.files_cached = cache.hits
    pool = TimeoutPool(process, processes, timeout, initializer=init, initargs=(cfg,))
    done = 0
    for task, res in pool.imap_unordered(tasks):
        kind, _, rel = task
        done += 1
        if progress and done % 500 == 0:
            progress(f"{tree.repo}: {done}/{len(tasks)} files parsed")
        _take(out, kind, rel, res, sizes)
        if not isinstance(res, TaskFailed):
            cache.put(rel, digests[rel], res)
    cache.save()
    out.units.sort(key=lambda pu: (pu[0], pu[1].line_start))
    out.kernels.sort(key=lambda k: (k.path, k.line))
    funnel.seconds = round(time.monotonic() - t0, 2)
    return out


def _take(out: ScanResult, kind: str, rel: str, res: FileResult | TaskFailed, sizes: dict[str, int]) -> None:
    funnel = out.funnel
    if kind == "py":
        funnel.files_scanned += 1
        funnel.bytes_scanned += sizes.get(rel, 0)
    else:
        funnel.kernel_files += 1
    if isinstance(res, TaskFailed):
        funnel.skip(res.reason)
        if kind == "py":
            funnel.files_prefiltered += 1
        out.skips.append({"path": rel, "reason": res.reason, "detail": res.detail[:300]})
        return
    _account(out, res, kind)


def _account(out: ScanResult, res: FileResult, kind: str) -> None:
    f, tree = out.funnel, out.tree
    if res.status == "skipped":
        f.skip(res.skip_reason or "error")
        out.skips.append({"path": res.path, "reason": res.skip_reason, "detail": (res.detail or "")[:300]})
        if res.skip_reason in PARSE_SKIPS:
            f.files_prefiltered += 1
    elif kind == "py" and res.status in ("ok", "no_collectives"):
        f.files_prefiltered += 1
        if res.call_sites:
            f.files_with_collectives += 1
        f.call_sites += res.call_sites
        f.module_level_calls += res.module_level_calls
        f.functions_extracted += len(res.units)
        out.units.extend((res.path, u) for u in res.units)
    for k in res.kernels:
        out.kernels.append(
            KernelEntry(
                repo=tree.repo,
                path=res.path,
                commit=tree.commit,
                license=tree.license,
                url=tree.url(res.path, k["line"], k["line"]),
                **k,
            )
        )
    if res.kernels:
        f.kernels += len(res.kernels)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
