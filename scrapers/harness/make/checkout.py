"""Where a candidate's code comes from: the scrape folder's candidates the harness makes modules of
(`selected`), the candidate repository's checkout under a folder of checkouts (`checkout`), and that
checkout's Python files for inlining: module index and parsed files (libcst, parse only, cached)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import libcst as cst

from mgbench.scrapers.closure import collect, module_binders
from mgbench.scrapers.resolve import Resolver, module_name_for


def selected(scrape_dir: Path) -> list[dict[str, Any]]:
    """Unique, license-permitted candidates with an extracted module."""
    out = []
    with (scrape_dir / "candidates.jsonl").open() as f:
        for line in f:
            c = json.loads(line)
            if c.get("unique") and c.get("license_permitted") and c.get("module_path"):
                out.append(c)
    return out


def checkout(src: Path | str | None, repo: str) -> Path | None:
    """The candidate repository's checkout under `src` (`SRC/<name>` or `SRC/<owner>+<name>`)."""
    if src is None:
        return None
    for d in (Path(src) / repo.split("/")[-1], Path(src) / repo.replace("/", "+")):
        if d.is_dir():
            return d
    return None


@lru_cache(maxsize=16)
def repo_index(root: str) -> dict[str, str]:
    """Dotted module name -> file (relative to `root`); nested `python/`/`src/` roots are indexed too."""
    out: dict[str, str] = {}
    base = Path(root)
    for p in sorted(base.rglob("*.py")):
        rel = p.relative_to(base).as_posix()
        parts = rel.split("/")
        if p.is_symlink() or any(x.startswith(".") for x in parts):
            continue
        subs = [rel] + ["/".join(parts[i + 1 :]) for i, x in enumerate(parts[:-1]) if i and x in ("python", "src")]
        for sub in subs:
            name, _ = module_name_for(sub)
            if name:
                out.setdefault(name, rel)
    return out


@dataclass
class RepoFile:
    rel: str
    source: str
    module: cst.Module
    binders: dict[str, list[int]]
    resolver: Resolver
    star: bool
    needs: dict[str, Any] = field(default_factory=dict)  # name -> closure.Needed (memo)

    def need(self, name: str) -> Any:
        if name not in self.needs:
            self.needs[name] = collect(list(self.module.body), self.binders, {name})
        return self.needs[name]

    def span(self, code: str) -> tuple[int, int]:
        """First and last line of a statement's code in the file (leading blank/comment lines skipped)."""
        lines = code.splitlines()
        skip = next((k for k, text in enumerate(lines) if text.strip() and not text.lstrip().startswith("#")), 0)
        body = "\n".join(lines[skip:])
        pos = self.source.find(body)
        start = self.source.count("\n", 0, max(pos, 0)) + 1
        return start, start + body.count("\n")


@lru_cache(maxsize=300)
def parse(root: str, rel: str) -> RepoFile:
    source = (Path(root) / rel).read_text(encoding="utf-8", errors="replace")
    module = cst.parse_module(source)
    name, is_pkg = module_name_for(rel)
    star = any(
        isinstance(x, cst.ImportFrom) and isinstance(x.names, cst.ImportStar)
        for s in module.body
        if isinstance(s, cst.SimpleStatementLine)
        for x in s.body
    )
    return RepoFile(rel, source, module, module_binders(list(module.body)), Resolver(name, is_pkg), star)
