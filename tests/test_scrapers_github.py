"""PyGithub against a local fake of the REST API: search pagination, retries, license, cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
from fake_github import SECONDARY, FakeGithub, FakeRepo

from mgbench.cli import main
from mgbench.scrapers.cache import DiskCache
from mgbench.scrapers.gh_fetch import GithubConfig, GithubFetcher, OfflineMiss, Pacer
from mgbench.scrapers.licenses import permitted

COMM = b'''import torch
import torch.distributed as dist

SCALE = 0.5


def _prep(x):
    return x * SCALE


def row_parallel_linear(x, weight, group=None):
    """Row-parallel linear: local GEMM, then all-reduce of the partial sums."""
    y = torch.matmul(_prep(x), weight)
    dist.all_reduce(y, group=group)
    return y
'''
SOURCES = """
repositories:
  - repo: acme/tp
    commit: {sha}
  - repo: acme/broken
    commit: {sha}
search:
  per_minute: 600
  per_page: 2
  max_results: 1000
  max_new_repos: 5
  queries: ['"all_reduce" language:Python']
"""


def fetcher(gh: FakeGithub, tmp: Path, **kw) -> GithubFetcher:
    cfg = GithubConfig(
        token="t0k3n", base_url=gh.url, per_minute=600, per_page=2, backoff=0.01, secondary_rate_wait=1, **kw
    )
    return GithubFetcher(cfg, DiskCache(tmp / "cache"))


@pytest.fixture()
def gh():
    with FakeGithub() as g:
        g.add(FakeRepo("acme/tp", {"LICENSE": b"MIT License\n", "tp/__init__.py": b"", "tp/layers.py": COMM}))
        g.add(FakeRepo("acme/gpl", {"g.py": COMM}, license="GPL-3.0"))
        g.add(FakeRepo("acme/nolicense", {"n.py": COMM}, license=None))
        g.search_results['"all_reduce" language:Python'] = [
            ("acme/tp", "tp/layers.py"),
            ("acme/gpl", "g.py"),
            ("acme/nolicense", "n.py"),
            ("acme/tp", "tp/other.py"),
            ("zed/found", "z.py"),
        ]
        g.add(FakeRepo("zed/found", {"z.py": COMM}, license="Apache-2.0"))
        yield g


def test_search_follows_link_pagination(gh, tmp_path):
    hits = fetcher(gh, tmp_path).search('"all_reduce" language:Python')
    assert [h.repo for h in hits] == ["acme/tp", "acme/gpl", "acme/nolicense", "acme/tp", "zed/found"]
    pages = gh.requests("/search/code")
    assert len(pages) == 3 and "page=2" in pages[1] and "page=3" in pages[2]


def test_search_stops_at_max_results(gh, tmp_path):
    hits = fetcher(gh, tmp_path, max_results=3).search('"all_reduce" language:Python')
    assert len(hits) == 3
    assert len(gh.requests("/search/code")) == 2


def test_secondary_rate_limit_403_is_retried_after_retry_after(gh, tmp_path):
    gh.faults["/search/code"] = [(403, {"Retry-After": "1"}, SECONDARY)]
    hits = fetcher(gh, tmp_path).search('"all_reduce" language:Python')
    assert len(hits) == 5
    assert len(gh.requests("/search/code")) == 4  # the 403 + three pages


def test_5xx_and_429_are_retried(gh, tmp_path):
    gh.faults["/repos/acme/tp"] = [
        (502, {}, {"message": "Bad Gateway"}),
        (503, {}, {"message": "busy"}),
        (429, {"Retry-After": "0"}, {"message": "Too Many Requests"}),
    ]
    info = fetcher(gh, tmp_path).repo_info("acme/tp")
    assert info.default_branch == "main" and info.license == "MIT"
    assert gh.requests("/repos/acme/tp").count("/repos/acme/tp") == 4


def test_persistent_5xx_gives_up_after_the_retry_budget(gh, tmp_path):
    gh.faults["/repos/acme/gpl"] = [(500, {}, {"message": "down"})] * 10
    with pytest.raises(requests.exceptions.RetryError) as e:  # an OSError: prepare() records it, goes on
        fetcher(gh, tmp_path, retries=2).repo_info("acme/gpl")
    assert isinstance(e.value, OSError) and len(gh.requests("/repos/acme/gpl")) == 3
    assert fetcher(gh, tmp_path).repo_info("acme/tp").license == "MIT"


def test_license_lookup(gh, tmp_path):
    f = fetcher(gh, tmp_path)
    tp, gpl, none = (f.repo_info(r) for r in ("acme/tp", "acme/gpl", "acme/nolicense"))
    assert (tp.license, tp.license_source) == ("MIT", "license endpoint")
    assert gpl.license == "GPL-3.0" and not permitted(gpl.license)
    assert none.license is None and none.license_source == "none" and not permitted(none.license)
    assert "/repos/acme/tp/license" in gh.requests("/repos/acme/tp/license")


def test_cache_hits_make_no_requests(gh, tmp_path):
    f = fetcher(gh, tmp_path)
    f.repo_info("acme/tp")
    f.search('"all_reduce" language:Python')
    tar = f.tarball("acme/tp", "c" * 40)
    n = len(gh.log)
    f2 = fetcher(gh, tmp_path)
    assert f2.repo_info("acme/tp").license == "MIT"
    assert len(f2.search('"all_reduce" language:Python')) == 5
    assert f2.tarball("acme/tp", "c" * 40) == tar
    assert len(gh.log) == n and f2.cache.hits == 2 and f2.api_calls == 0
    offline = fetcher(gh, tmp_path, offline=True)
    with pytest.raises(OfflineMiss):
        offline.repo_info("acme/other")


def test_resolve_commit_and_tarball_redirect(gh, tmp_path):
    f = fetcher(gh, tmp_path)
    sha = f.resolve_commit("acme/tp", "main")
    assert sha == "a" * 40
    tar = f.tarball("acme/tp", sha)
    assert tar.stat().st_size > 0
    assert any(p.startswith("/_codeload/acme/tp/") for p in gh.requests("/_codeload"))


def test_pacer_limits_requests_per_minute():
    t = [0.0]
    slept: list[float] = []
    p = Pacer(10, clock=lambda: t[0], sleep=lambda s: (slept.append(s), t.__setitem__(0, t[0] + s)))
    for _ in range(10):
        p.wait()
        t[0] += 1.0
    assert slept == []
    p.wait()
    assert slept == [pytest.approx(50.0)]


def test_scrape_github_end_to_end_and_warm_rerun_makes_zero_requests(gh, tmp_path):
    sha = "d" * 40
    gh.add(FakeRepo("acme/broken", {}, raw_tarball=b"this is not a tar.gz"))
    tp = gh.repos["acme/tp"]
    tp.files["tp/py2.py"] = b"print 'hello'\nimport torch.distributed as dist\ndist.all_reduce(x)\n"
    tp.links["tp/link.py"] = "../../etc/passwd"
    tp.unsafe.append("../escape.py")
    src = tmp_path / "sources.yaml"
    src.write_text(SOURCES.format(sha=sha))
    out = tmp_path / "out"
    argv = [
        "scrape",
        "github",
        "--sources",
        str(src),
        "--out",
        str(out),
        "--base-url",
        gh.url,
        "--processes",
        "1",
        "--quiet",
    ]
    assert main(argv) == 0
    first = len(gh.log)
    assert first > 0
    funnel = {f["repo"]: f for f in json.loads((out / "funnel.json").read_text())["repos"]}
    assert set(funnel) == {"acme/tp", "acme/broken", "acme/gpl", "acme/nolicense", "zed/found"}
    assert funnel["acme/tp"]["functions_extracted"] == 1 and funnel["acme/tp"]["license_permitted"] == 1
    assert funnel["acme/tp"]["skipped"] == {"python2": 1, "symlink": 1, "unsafe_path": 1}
    assert funnel["acme/broken"]["skipped"] == {"unreadable_archive": 1}
    assert funnel["acme/gpl"]["license_permitted"] == 0 and funnel["acme/nolicense"]["license_permitted"] == 0
    cands = [json.loads(x) for x in (out / "candidates.jsonl").read_text().splitlines()]
    rep = [c for c in cands if c["unique"]]
    assert len(rep) == 1 and rep[0]["provenance"]["repo"] == "acme/tp"  # the permitted origin wins
    assert {d["repo"] for d in rep[0]["duplicates"]} == {"acme/gpl", "acme/nolicense", "zed/found"}
    assert rep[0]["provenance"]["commit"] == sha and rep[0]["provenance"]["license"] == "MIT"
    assert (out / rep[0]["module_path"]).is_file()
    assert len(list((out / "modules").glob("*.py"))) == 1
    before = (out / "candidates.jsonl").read_text()
    assert main(argv) == 0
    assert len(gh.log) == first  # warm cache: zero requests
    assert (out / "candidates.jsonl").read_text() == before
