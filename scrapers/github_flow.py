"""Turn the sources file into local trees through GitHub: curated pins, then code-search discovery."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from github import GithubException

from mgbench.scrapers.archive import extract_tarball
from mgbench.scrapers.gh_fetch import GithubFetcher, OfflineMiss
from mgbench.scrapers.licenses import normalize
from mgbench.scrapers.sources import RepoSource, Sources
from mgbench.scrapers.tree import SourceTree


@dataclass
class Prepared:
    trees: list[SourceTree] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)  # {repo, stage, reason, detail}
    discovery: dict = field(default_factory=dict)  # repo -> {"hits", "queries"}


def discover(
    fetcher: GithubFetcher, sources: Sources, log: Callable[[str], None]
) -> tuple[list[str], dict, list[dict]]:
    """Repositories found by the code-search queries (most hits first), not already curated."""
    hits: Counter[str] = Counter()
    per_query: dict[str, set[str]] = {}
    failures = []
    for q in sources.search.expanded():
        try:
            found = fetcher.search(q)
        except (GithubException, OfflineMiss, OSError) as e:
            failures.append({"repo": None, "stage": "search", "reason": type(e).__name__, "detail": f"{q}: {e}"[:300]})
            log(f"search failed: {q}: {e}")
            continue
        log(f"search: {len(found)} hits for {q}")
        for h in found:
            if sources.search.skip_forks and h.fork:
                continue
            hits[h.repo] += 1
            per_query.setdefault(h.repo, set()).add(q)
    curated = {r.repo.lower() for r in sources.repositories}
    new = [r for r, _ in sorted(hits.items(), key=lambda kv: (-kv[1], kv[0].lower())) if r.lower() not in curated]
    report = {r: {"hits": hits[r], "queries": sorted(per_query[r])} for r in hits}
    return new[: sources.search.max_new_repos], report, failures


def prepare(
    fetcher: GithubFetcher,
    sources: Sources,
    trees_dir: Path,
    only: list[str] | None = None,
    with_discovery: bool = True,
    log: Callable[[str], None] = lambda m: None,
) -> Prepared:
    out = Prepared()
    todo = [r for r in sources.repositories if not only or r.repo.lower() in {o.lower() for o in only}]
    if with_discovery and sources.search.queries and not only:
        new, report, failures = discover(fetcher, sources, log)
        out.discovery, out.failures = report, failures
        base = len(sources.repositories)
        todo += [RepoSource(r, priority=base + i) for i, r in enumerate(new)]
    for src in todo:
        try:
            out.trees.append(_fetch_one(fetcher, src, trees_dir, out, log))
        except (GithubException, OfflineMiss, OSError) as e:
            out.failures.append(
                {"repo": src.repo, "stage": "fetch", "reason": type(e).__name__, "detail": str(e)[:300]}
            )
            log(f"{src.repo}: fetch failed: {e}")
    return out


def _fetch_one(
    fetcher: GithubFetcher, src: RepoSource, trees_dir: Path, out: Prepared, log: Callable[[str], None]
) -> SourceTree:
    info = fetcher.repo_info(src.repo)
    commit = src.commit or fetcher.resolve_commit(info.repo, info.default_branch)
    tarball = fetcher.tarball(info.repo, commit)
    dest = trees_dir / f"{info.repo.replace('/', '+')}@{commit[:12]}"
    rep = extract_tarball(tarball, dest)
    if rep.error:
        out.failures.append(
            {"repo": src.repo, "stage": "extract", "reason": "unreadable_archive", "detail": rep.error[:300]}
        )
    log(f"{info.repo}@{commit[:12]}: {rep.files} files extracted, license {info.license}")
    license = info.license or normalize(src.license)
    tree = SourceTree(
        repo=info.repo,
        root=dest,
        commit=commit,
        license=license,
        license_file=f"GitHub API ({info.license_source})" if info.license else "sources.yaml",
        url_base=info.html_url or f"https://github.com/{info.repo}",
        priority=src.priority,
        subdirs=[s for s in src.subdirs if (dest / s).is_dir()],
        extra_skips=dict(rep.skipped),
    )
    return tree


def write_discovery(out: Path, prepared: Prepared) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "discovery.json").write_text(
        json.dumps({"repos": prepared.discovery, "failures": prepared.failures}, indent=1, sort_keys=True) + "\n"
    )
