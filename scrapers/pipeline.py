"""From scanned trees to the published scrape outputs.

OUT/candidates.jsonl   one Candidate per extracted unit (duplicates and non-permitted included,
                       flagged), sorted by repo, path, line
OUT/modules/<id>.py    the standalone module of each unique, license-permitted candidate
OUT/funnel.json        per-repository funnel and skip counts, plus totals
OUT/kernels.jsonl      library multi-GPU kernels (KernelEntry)
OUT/skipped.jsonl      every skipped file or entry with its reason
OUT/state/             per-repository scan state (local cache, see state.py)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict
from pathlib import Path

from mgbench.scrapers import state
from mgbench.scrapers.classify import TaxonomyIds, is_classified
from mgbench.scrapers.dedup import Member, cluster
from mgbench.scrapers.licenses import permitted
from mgbench.scrapers.records import SCHEMA_VERSION, Candidate, Funnel, Provenance, Unit
from mgbench.scrapers.scan import ScanResult, log, scan_tree
from mgbench.scrapers.tree import SourceTree

_ROLES = [
    ("test", re.compile(r"(^|/)(tests?|testing)/|(^|/)test_[^/]*\.py$|_test\.py$|(^|/)conftest\.py$")),
    ("benchmark", re.compile(r"(^|/)(benchmarks?|bench|perf)/|(^|/)bench[^/]*\.py$")),
    ("example", re.compile(r"(^|/)(examples?|tutorials?|demos?|recipes?|scripts?|tools)/")),
]


def role_of(path: str) -> str:
    return next((r for r, rx in _ROLES if rx.search(path)), "library")


def candidate_id(repo: str, path: str, unit: Unit, commit: str | None) -> str:
    key = f"{repo}\0{path}\0{unit.qualname}\0{unit.line_start}\0{commit or ''}"
    return "c" + hashlib.sha1(key.encode()).hexdigest()[:15]


def build_candidates(scans: list[ScanResult], threshold: float = 0.8) -> tuple[list[Candidate], dict[str, str]]:
    """Candidates over all scans with dedup and license flags; also {id: module source}."""
    rows: list[tuple[ScanResult, str, Unit, str]] = []
    for s in scans:
        for path, u in s.units:
            rows.append((s, path, u, candidate_id(s.tree.repo, path, u, s.tree.commit)))
    members = [
        Member(
            cid,
            u.ast_hash,
            u.minhash,
            (not permitted(s.tree.license), s.tree.priority, s.tree.repo, path, u.line_start),
        )
        for s, path, u, cid in rows
    ]
    clusters = cluster(members, threshold)
    prov: dict[str, Provenance] = {}
    for s, path, u, cid in rows:
        prov[cid] = Provenance(
            s.tree.repo,
            path,
            s.tree.commit,
            u.line_start,
            u.line_end,
            s.tree.license,
            s.tree.url(path, u.line_start, u.line_end),
        )
    dups: dict[str, list[Provenance]] = {}
    for cid, (rep, _) in clusters.items():
        if rep != cid:
            dups.setdefault(rep, []).append(prov[cid])
    out, sources = [], {}
    for s, path, u, cid in rows:
        rep = clusters[cid][0]
        ok = permitted(s.tree.license)
        unique = rep == cid
        mod = f"modules/{cid}.py" if unique and ok else None
        if mod:
            sources[cid] = u.module_source
        out.append(
            Candidate(
                id=cid,
                schema=SCHEMA_VERSION,
                provenance=prov[cid],
                qualname=u.qualname,
                entry=u.entry,
                kind=u.kind,
                module_path=mod,
                compiles=u.compiles,
                params=u.params,
                returns=u.returns,
                docstring=u.docstring,
                decorators=u.decorators,
                calls=u.calls,
                imports=u.imports,
                helpers=u.helpers,
                unresolved=u.unresolved,
                uses_globals=u.uses_globals,
                classification=u.classification,
                ast_hash=u.ast_hash,
                license_permitted=ok,
                unique=unique,
                cluster=rep,
                duplicates=sorted(dups.get(cid, []), key=lambda p: (p.repo, p.path, p.line_start)),
                lines=u.line_end - u.line_start + 1,
                role=role_of(path),
            )
        )
    out.sort(key=lambda c: (c.provenance.repo, c.provenance.path, c.provenance.line_start))
    return out, sources


def fill_funnels(scans: list[ScanResult], cands: list[Candidate]) -> list[Funnel]:
    by_repo = {s.tree.repo: s.funnel for s in scans}
    for f in by_repo.values():
        f.unique = f.license_permitted = f.classified = 0
    for c in cands:
        f = by_repo[c.provenance.repo]
        if c.unique:
            f.unique += 1
            if c.license_permitted:
                f.license_permitted += 1
                if is_classified(c.classification):
                    f.classified += 1
    return [by_repo[k] for k in sorted(by_repo, key=lambda r: r.lower())]


def header(c: Candidate) -> str:
    p = c.provenance
    return (
        f"# Extracted by mgbench scrapers (scope closure of {c.qualname}).\n"
        f"# Source: {p.repo}@{(p.commit or 'unknown')[:12]}:{p.path} lines {p.line_start}-{p.line_end}\n"
        f"# License: {p.license}. Original: {p.url or 'n/a'}\n"
    )


def write_outputs(out: Path, scans: list[ScanResult], cands: list[Candidate], sources: dict[str, str]) -> list[Funnel]:
    out.mkdir(parents=True, exist_ok=True)
    mdir = out / "modules"
    mdir.mkdir(exist_ok=True)
    keep = set()
    for c in cands:
        if c.module_path:
            path = out / c.module_path
            text = header(c) + sources[c.id]
            keep.add(path.name)
            if not path.exists() or path.read_text() != text:
                _atomic_write(path, text)
    for stale in mdir.glob("*.py"):
        if stale.name not in keep:
            stale.unlink()
    _atomic_write(out / "candidates.jsonl", "".join(json.dumps(c.to_json()) + "\n" for c in cands))
    funnels = fill_funnels(scans, cands)
    totals = Funnel(repo="TOTAL")
    for f in funnels:
        for k, v in asdict(f).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                setattr(totals, k, round(getattr(totals, k) + v, 2))
        for r, n in f.skipped.items():
            totals.skip(r, n)
    _atomic_write(
        out / "funnel.json",
        json.dumps({"schema": SCHEMA_VERSION, "repos": [asdict(f) for f in funnels], "total": asdict(totals)}, indent=1)
        + "\n",
    )
    _atomic_write(out / "kernels.jsonl", "".join(json.dumps(asdict(k)) + "\n" for s in scans for k in s.kernels))
    _atomic_write(
        out / "skipped.jsonl", "".join(json.dumps({"repo": s.tree.repo, **k}) + "\n" for s in scans for k in s.skips)
    )
    return funnels


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)


def run(
    trees: list[SourceTree],
    out: Path,
    tax: TaxonomyIds,
    facades: dict[str, str] | None = None,
    processes: int = 2,
    timeout: float = 60.0,
    kernels: bool = True,
    threshold: float = 0.8,
    quiet: bool = False,
    fresh: bool = False,
) -> list[Funnel]:
    """Scan `trees`, store their state, rebuild every output over all stored repositories.

    Unchanged files reuse their previous results unless `fresh`."""
    sdir = out / "state"
    for t in trees:
        if not quiet:
            log(f"scanning {t.repo} ({t.root}) ...")
        cache = None if fresh else sdir / f"{state.slug(t.repo)}.files.pkl"
        scan = scan_tree(t, tax, facades, processes, timeout, kernels, None if quiet else log, cache)
        state.save(sdir, scan)
        if not quiet:
            f = scan.funnel
            log(
                f"  {f.files_scanned} py files ({f.files_cached} files unchanged), "
                f"{f.files_with_collectives} with collectives, "
                f"{f.functions_extracted} functions, {f.kernels} kernels in {f.seconds:.1f}s"
            )
    scans = state.load_all(sdir)
    cands, sources = build_candidates(scans, threshold)
    return write_outputs(out, scans, cands, sources)
