"""The sources file: pinned repositories, facade modules and code-search queries."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

DEFAULT_SOURCES = Path(__file__).resolve().parent / "sources.yaml"
_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_SHA = re.compile(r"^[0-9a-f]{40}$")


@dataclass
class RepoSource:
    repo: str  # owner/name
    commit: str | None = None  # 40-hex pin; None: resolve the default branch head (and record it)
    license: str | None = None
    subdirs: list[str] = field(default_factory=list)
    priority: int = 0


@dataclass
class SearchConfig:
    queries: list[str] = field(default_factory=list)
    shards: list[str] = field(default_factory=list)
    per_minute: float = 10.0
    max_results: int = 1000
    per_page: int = 100
    max_new_repos: int = 50
    skip_forks: bool = True

    def expanded(self) -> list[str]:
        """Every query once per shard qualifier (or once when there are no shards)."""
        return [f"{q} {s}".strip() for q in self.queries for s in (self.shards or [""])]


@dataclass
class Sources:
    repositories: list[RepoSource]
    facades: dict[str, str]
    search: SearchConfig
    path: str = ""

    def find(self, repo: str) -> RepoSource | None:
        return next((r for r in self.repositories if r.repo.lower() == repo.lower()), None)


def load_sources(path: Path | str | None = None) -> Sources:
    """Read and check a sources file; errors name the file and the entry."""
    path = Path(path) if path else DEFAULT_SOURCES
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML ({e})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping")
    repos = []
    for i, e in enumerate(data.get("repositories") or []):
        if not isinstance(e, dict) or not _REPO.match(str(e.get("repo", ""))):
            raise ValueError(f"{path}: repositories[{i}]: need 'repo: owner/name', got {e!r}")
        commit = e.get("commit")
        if commit is not None and not _SHA.match(str(commit)):
            raise ValueError(f"{path}: {e['repo']}: commit must be 40 lowercase hex digits, got {commit!r}")
        subdirs = e.get("subdirs") or []
        if not isinstance(subdirs, list):
            raise ValueError(f"{path}: {e['repo']}: subdirs must be a list")
        repos.append(RepoSource(e["repo"], commit, e.get("license"), [str(s) for s in subdirs], priority=i))
    facades = data.get("facades") or {}
    if not isinstance(facades, dict):
        raise ValueError(f"{path}: facades must map module -> torch module")
    s = data.get("search") or {}
    known = {f for f in SearchConfig.__dataclass_fields__}
    bad = set(s) - known
    if bad:
        raise ValueError(f"{path}: search: unknown key {sorted(bad)[0]!r}")
    search = SearchConfig(**s)
    return Sources(repos, {str(k): str(v) for k, v in facades.items()}, search, str(path))
