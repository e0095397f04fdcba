"""GitHub through PyGithub: code search within its limits, repository metadata and licenses,
commit resolution and one tarball per repository at a pinned commit. Every answer is cached on
disk (mgbench.scrapers.cache), so a re-run with a warm cache makes zero requests.

Limits honoured: code search is paced to `per_minute` requests (GitHub: 10/min authenticated) and
stops at `max_results` (GitHub: 1,000 per query). Transient failures are retried by PyGithub's
GithubRetry (403 secondary rate limits honour Retry-After, 429 and 5xx back off exponentially);
the tarball download goes through a urllib3 Retry with the same policy and never forwards the
token to another host.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import quote, urlparse

import requests
from github import Auth, Github, GithubException, GithubRetry
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from mgbench.scrapers.cache import DiskCache
from mgbench.scrapers.licenses import normalize

RETRY_STATUSES = [429, *range(500, 600)]


@dataclass
class GithubConfig:
    token: str | None = field(default_factory=lambda: os.environ.get("GITHUB_TOKEN"))
    base_url: str = "https://api.github.com"
    per_minute: float = 10.0  # code-search requests per minute
    max_results: int = 1000  # per query
    per_page: int = 100
    retries: int = 5
    backoff: float = 2.0  # urllib3 backoff_factor
    secondary_rate_wait: float = 60.0
    timeout: float = 60.0
    offline: bool = False  # answer from the cache only


class Pacer:
    """At most `per_minute` events in any 60-second window (sleeps when the window is full)."""

    def __init__(
        self,
        per_minute: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.n = max(1, int(per_minute))
        self.clock, self.sleep = clock, sleep
        self.events: deque[float] = deque()

    def wait(self) -> float:
        now = self.clock()
        while self.events and now - self.events[0] >= 60.0:
            self.events.popleft()
        slept = 0.0
        if len(self.events) >= self.n:
            slept = 60.0 - (now - self.events[0])
            self.sleep(slept)
            now = self.clock()
            self.events.popleft()
        self.events.append(now)
        return slept


@dataclass
class SearchHit:
    repo: str
    path: str
    sha: str | None
    url: str | None
    fork: bool = False


@dataclass
class RepoInfo:
    repo: str
    default_branch: str
    license: str | None  # SPDX id (None: no license or not recognized)
    license_source: str  # license endpoint | repository | none
    fork: bool = False
    parent: str | None = None
    html_url: str | None = None
    stars: int = 0


class OfflineMiss(RuntimeError):
    pass


class GithubFetcher:
    def __init__(self, cfg: GithubConfig, cache: DiskCache):
        self.cfg, self.cache = cfg, cache
        self.pacer = Pacer(cfg.per_minute)
        self.api_calls = 0  # calls that needed the network (cache misses)
        self._gh: Github | None = None

    @property
    def gh(self) -> Github:
        if self.cfg.offline:
            raise OfflineMiss("offline: answer not in the cache")
        if self._gh is None:
            retry = GithubRetry(
                total=self.cfg.retries,
                backoff_factor=self.cfg.backoff,
                secondary_rate_wait=self.cfg.secondary_rate_wait,
                status_forcelist=RETRY_STATUSES,
            )
            auth = Auth.Token(self.cfg.token) if self.cfg.token else None
            self._gh = Github(
                auth=auth,
                base_url=self.cfg.base_url,
                per_page=self.cfg.per_page,
                retry=retry,
                timeout=int(self.cfg.timeout),
                seconds_between_requests=None,
            )
        return self._gh

    # ---- code search --------------------------------------------------------------------------
    def search(self, query: str) -> list[SearchHit]:
        key = f"{self.cfg.base_url}|{query}|{self.cfg.max_results}"
        cached = self.cache.get("search", key)
        if cached is not None:
            return [SearchHit(**h) for h in cached]
        hits: list[SearchHit] = []
        it = iter(self.gh.search_code(query))
        while len(hits) < self.cfg.max_results:
            if len(hits) % self.cfg.per_page == 0:
                self.pacer.wait()  # the next item needs a new page: one search request
                self.api_calls += 1
            try:
                item = next(it)
            except StopIteration:
                break
            repo = item.repository
            hits.append(SearchHit(repo.full_name, item.path, item.sha, item.html_url, bool(repo.fork)))
        self.cache.put("search", key, [asdict(h) for h in hits])
        return hits

    # ---- repositories -------------------------------------------------------------------------
    def repo_info(self, full_name: str) -> RepoInfo:
        key = f"{self.cfg.base_url}|{full_name}"
        cached = self.cache.get("repo", key)
        if cached is not None:
            return RepoInfo(**cached)
        r = self.gh.get_repo(full_name)
        self.api_calls += 1
        spdx, source = None, "none"
        try:
            lic = r.get_license()
            self.api_calls += 1
            spdx, source = normalize(lic.license.spdx_id), "license endpoint"
        except GithubException as e:
            if e.status != 404:
                raise
        if spdx is None and r.license is not None:
            spdx, source = normalize(r.license.spdx_id), "repository"
        info = RepoInfo(
            r.full_name,
            r.default_branch,
            spdx,
            source if spdx else "none",
            bool(r.fork),
            r.parent.full_name if r.fork and r.parent else None,
            r.html_url,
            int(r.stargazers_count or 0),
        )
        self.cache.put("repo", key, asdict(info))
        return info

    def resolve_commit(self, full_name: str, ref: str) -> str:
        """The commit sha of a branch / tag (cached: a re-run pins the first answer)."""
        key = f"{self.cfg.base_url}|{full_name}|{ref}"
        cached = self.cache.get("commit", key)
        if cached is not None:
            return cached
        _, data = self.gh.requester.requestJsonAndCheck("GET", f"/repos/{full_name}/commits/{quote(ref, safe='')}")
        sha = data["sha"]
        self.api_calls += 1
        self.cache.put("commit", key, sha)
        return sha

    def tarball(self, full_name: str, commit: str) -> Path:
        """The repository's tar.gz at `commit`, downloaded once."""
        path = self.cache.blob("tarballs", f"{full_name.replace('/', '+')}@{commit}.tar.gz")
        if path.is_file() and path.stat().st_size > 0:
            return path
        if self.cfg.offline:
            raise OfflineMiss(f"offline: no cached tarball for {full_name}@{commit}")
        headers, _ = self.gh.requester.requestJsonAndCheck(
            "GET", f"/repos/{full_name}/tarball/{quote(commit, safe='')}"
        )
        link = headers["location"]
        self.api_calls += 1
        self._download(link, path)
        return path

    def _download(self, url: str, dest: Path) -> None:
        retry = Retry(
            total=self.cfg.retries,
            backoff_factor=self.cfg.backoff,
            status_forcelist=RETRY_STATUSES,
            allowed_methods=["GET"],
            respect_retry_after_header=True,
        )
        s = requests.Session()
        s.mount("http://", HTTPAdapter(max_retries=retry))
        s.mount("https://", HTTPAdapter(max_retries=retry))
        headers = {}
        if self.cfg.token and urlparse(url).hostname == urlparse(self.cfg.base_url).hostname:
            headers["Authorization"] = f"token {self.cfg.token}"
        tmp = dest.with_name(dest.name + f".part{os.getpid()}")
        with s.get(url, headers=headers, stream=True, timeout=self.cfg.timeout) as r:
            r.raise_for_status()
            with open(tmp, "wb") as f:
                for chunk in r.iter_content(1 << 20):
                    f.write(chunk)
        tmp.replace(dest)
        self.api_calls += 1
