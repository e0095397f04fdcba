"""CLI: `mgbench scrape github | local | report | gaps` (and `harness`, `settle`, `crosscheck`, `gate`)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

DEFAULT_OUT = "mgbench-out/scrape"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default=DEFAULT_OUT, help="scrape output folder (default: %(default)s)")
    p.add_argument("--sources", help="sources file (default: scrapers/sources.yaml)")
    p.add_argument("--processes", type=int, default=2, help="worker processes (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per file before its worker is killed")
    p.add_argument("--threshold", type=float, default=0.8, help="MinHash similarity of near duplicates")
    p.add_argument("--no-kernels", action="store_true", help="skip the library kernel index")
    p.add_argument("--fresh", action="store_true", help="re-parse every file (ignore per-file results of earlier runs)")
    p.add_argument("--quiet", action="store_true")


def register(sub: argparse._SubParsersAction) -> None:
    sc = sub.add_parser(
        "scrape",
        help="mine torch.distributed code: candidates for level-4 tasks",
        description="Mine functions that communicate through torch.distributed from "
        "GitHub or local checkouts; write candidates JSONL, extracted modules, "
        "a kernel index and the funnel.",
    )
    ss = sc.add_subparsers(dest="scrape_command", metavar="SOURCE")
    g = ss.add_parser("github", help="curated repositories + code-search discovery through the GitHub API")
    _common(g)
    g.add_argument("--repo", action="append", help="only these curated repositories (repeatable; no discovery)")
    g.add_argument("--no-discovery", action="store_true", help="skip code search")
    g.add_argument("--cache", help="API/tarball cache folder (default: OUT/cache)")
    g.add_argument("--base-url", default="https://api.github.com", help="GitHub API root (tests use a local server)")
    g.add_argument("--offline", action="store_true", help="answer from the cache only")
    g.add_argument("--refresh", action="store_true", help="ignore cached API answers (tarballs are kept)")
    g.add_argument("--search-per-minute", type=float, help="override the search pacing of the sources file")
    g.set_defaults(func=cmd_github)
    lo = ss.add_parser("local", help="scan local checkouts or folders (offline)")
    _common(lo)
    lo.add_argument("paths", nargs="+", help="folders or git checkouts")
    lo.add_argument("--repo", help="owner/name to record (one path only; default: git remote or folder name)")
    lo.add_argument("--commit", help="commit to record (one path only; default: git HEAD)")
    lo.add_argument("--license", help="SPDX id to record when no license file is found")
    lo.set_defaults(func=cmd_local)
    r = ss.add_parser("report", help="print the funnel per repository, to the shipped level-4 tasks")
    r.add_argument("--out", default=DEFAULT_OUT)
    r.add_argument("--harness", help="harness.jsonl of the level-4 funnel (default: OUT/harness.jsonl)")
    r.add_argument("--json", metavar="FILE", help="also write the level-4 funnel as JSON")
    r.set_defaults(func=cmd_report)
    gp = ss.add_parser(
        "gaps",
        help="rank patterns of mined candidates that no task family covers",
        description="Group the unique, permitted, classified candidates that no family of the "
        "current taxonomy covers (same workload, realizations it uses, a shared "
        "dim) by pattern, ranked by how many repositories show it.",
    )
    gp.add_argument("--out", default=DEFAULT_OUT)
    gp.add_argument("--top", type=int, default=25, help="rows to print (default: %(default)s)")
    gp.add_argument("--json", metavar="FILE", help="also write every cluster as JSON")
    gp.set_defaults(func=cmd_gaps)
    from mgbench.scrapers.harness.commands import add_parser as add_harness

    add_harness(ss, DEFAULT_OUT)
    from mgbench.scrapers.level4.commands import add_parser as add_gate

    add_gate(ss, DEFAULT_OUT)
    sc.set_defaults(func=lambda a: (sc.print_help(), 2)[1])


def _run(args: argparse.Namespace, trees: list, sources) -> int:
    from mgbench.scrapers.classify import load_ids
    from mgbench.scrapers.pipeline import run
    from mgbench.scrapers.report import render

    t0 = time.monotonic()
    run(
        trees,
        Path(args.out),
        load_ids(),
        sources.facades,
        args.processes,
        args.timeout,
        not args.no_kernels,
        args.threshold,
        args.quiet,
        args.fresh,
    )
    print(render(Path(args.out)))
    print(
        f"\nscraped {len(trees)} source(s) in {time.monotonic() - t0:.1f}s; candidates in "
        f"{Path(args.out) / 'candidates.jsonl'}"
    )
    return 0


def cmd_local(args: argparse.Namespace) -> int:
    from mgbench.scrapers.sources import load_sources
    from mgbench.scrapers.tree import describe

    sources = load_sources(args.sources)
    if len(args.paths) > 1 and (args.repo or args.commit):
        raise ValueError("--repo/--commit apply to a single path")
    trees = []
    for p in args.paths:
        root = Path(p)
        if not root.is_dir():
            raise FileNotFoundError(f"{p}: not a folder")
        tree = describe(root, args.repo, args.commit, args.license)
        src = sources.find(tree.repo)
        if src is not None:
            tree.priority = src.priority
            tree.license = tree.license or src.license
            # a checkout of a pinned repository is scanned where its pin says, as `scrape github` does
            tree.subdirs = [s for s in src.subdirs if (root / s).is_dir()]
            if src.subdirs and not tree.subdirs:
                raise FileNotFoundError(f"{p}: none of {tree.repo}'s pinned subdirs {src.subdirs} is there")
        trees.append(tree)
        if not args.quiet and not tree.commit:
            print(f"note: {p}: no git commit known; provenance will lack a commit (use --commit)", file=sys.stderr)
    return _run(args, trees, sources)


def cmd_github(args: argparse.Namespace) -> int:
    from mgbench.scrapers.cache import DiskCache
    from mgbench.scrapers.gh_fetch import GithubConfig, GithubFetcher
    from mgbench.scrapers.github_flow import prepare, write_discovery
    from mgbench.scrapers.scan import log
    from mgbench.scrapers.sources import load_sources

    sources = load_sources(args.sources)
    out = Path(args.out)
    cache = DiskCache(Path(args.cache) if args.cache else out / "cache", refresh=args.refresh)
    cfg = GithubConfig(
        base_url=args.base_url.rstrip("/"),
        offline=args.offline,
        per_minute=args.search_per_minute or sources.search.per_minute,
        max_results=sources.search.max_results,
        per_page=sources.search.per_page,
    )
    if not cfg.token and not cfg.offline:
        print("note: GITHUB_TOKEN is not set; code search needs a token and anonymous limits are low", file=sys.stderr)
    fetcher = GithubFetcher(cfg, cache)
    prepared = prepare(
        fetcher,
        sources,
        cache.root / "trees",
        args.repo,
        not args.no_discovery,
        (lambda m: None) if args.quiet else log,
    )
    write_discovery(out, prepared)
    rc = _run(args, prepared.trees, sources)
    print(
        f"GitHub: {fetcher.api_calls} API requests, cache {cache.hits} hits / {cache.misses} misses, "
        f"{len(prepared.failures)} failures (see {out / 'discovery.json'})"
    )
    return rc


def cmd_gaps(args: argparse.Namespace) -> int:
    from mgbench.scrapers.gaps import gaps_report

    try:
        print(gaps_report(Path(args.out), args.top, Path(args.json) if args.json else None))
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    import json

    from mgbench.scrapers.level4.funnel import funnel, funnel_table
    from mgbench.scrapers.report import render

    print(render(Path(args.out)))
    hpath = Path(args.harness) if args.harness else Path(args.out) / "harness.jsonl"
    if hpath.is_file():
        data = funnel(Path(args.out), hpath)
        print("\n" + funnel_table(data))
        if args.json:
            Path(args.json).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    elif args.harness or args.json:
        raise FileNotFoundError(f"{hpath}: no harness results for the level-4 funnel")
    return 0
