"""Local sources: walk a checkout or folder (offline), with git provenance and skip reasons.

Symlinks are never followed (a symlinked file is counted once, as a skip; a link that cannot be
resolved or loops is a `symlink_loop`), special files and unreadable folders are counted too.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mgbench.scrapers.licenses import detect_dir, normalize

PY_EXTS = (".py",)
KERNEL_EXTS = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".h", ".hpp", ".hip")
EXCLUDE_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".tox",
        ".venv",
        "venv",
        ".mypy_cache",
        ".pytest_cache",
        "site-packages",
        ".eggs",
    }
)


@dataclass
class TreeFile:
    rel: str  # POSIX path relative to the root
    path: str  # absolute path
    size: int
    kind: str  # py | kernel


@dataclass
class WalkSkip:
    rel: str
    reason: str
    detail: str = ""


@dataclass
class SourceTree:
    """A folder to scan and what is known about where it came from."""

    repo: str  # owner/name, or the folder name for a plain folder
    root: Path
    commit: str | None = None
    license: str | None = None
    license_file: str | None = None
    url_base: str | None = None  # https://github.com/owner/name
    dirty: bool = False
    priority: int = 0  # lower wins when picking a duplicate cluster's representative
    subdirs: list[str] = field(default_factory=list)
    extra_skips: dict[str, int] = field(default_factory=dict)  # counted before the walk (archive)

    def url(self, path: str, start: int | None = None, end: int | None = None) -> str | None:
        if not (self.url_base and self.commit):
            return None
        anchor = f"#L{start}-L{end}" if start else ""
        return f"{self.url_base}/blob/{self.commit}/{path}{anchor}"


def walk(root: Path, with_kernels: bool = True, subdirs: list[str] | None = None) -> Iterator[TreeFile | WalkSkip]:
    """Files to scan under `root` (sorted, deterministic) and the entries skipped."""
    exts = PY_EXTS + (KERNEL_EXTS if with_kernels else ())
    starts = [root / s for s in subdirs] if subdirs else [root]
    for start in starts:
        yield from _walk_dir(root, start, exts)


def _walk_dir(root: Path, d: Path, exts: tuple[str, ...]) -> Iterator[TreeFile | WalkSkip]:
    try:
        entries = sorted(os.scandir(d), key=lambda e: e.name)
    except OSError as e:
        yield WalkSkip(_rel(root, d), "unreadable", e.strerror or str(e))
        return
    for e in entries:
        rel = _rel(root, Path(e.path))
        try:
            if e.is_symlink():
                if e.name.endswith(exts) or _is_dir_link(e.path):
                    try:
                        os.stat(e.path)
                        yield WalkSkip(rel, "symlink", os.readlink(e.path))
                    except OSError as err:
                        yield WalkSkip(rel, "symlink_loop", err.strerror or str(err))
                continue
            st = e.stat(follow_symlinks=False)
        except OSError as err:
            yield WalkSkip(rel, "unreadable", err.strerror or str(err))
            continue
        if stat.S_ISDIR(st.st_mode):
            if e.name not in EXCLUDE_DIRS:
                yield from _walk_dir(root, Path(e.path), exts)
        elif e.name.endswith(exts):
            if not stat.S_ISREG(st.st_mode):
                yield WalkSkip(rel, "special_file")
            else:
                yield TreeFile(rel, e.path, st.st_size, "py" if e.name.endswith(PY_EXTS) else "kernel")


def _is_dir_link(path: str) -> bool:
    try:
        return os.path.isdir(path)
    except OSError:
        return True


def _rel(root: Path, p: Path) -> str:
    try:
        return p.relative_to(root).as_posix()
    except ValueError:
        return p.as_posix()


def _git(root: Path, *args: str) -> str | None:
    try:
        r = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


_REMOTE = re.compile(r"(?:github\.com[:/])([\w.-]+)/([\w.-]+?)(?:\.git)?/?$")


def describe(
    root: Path, repo: str | None = None, commit: str | None = None, license: str | None = None, priority: int = 0
) -> SourceTree:
    """A SourceTree for a local folder: git HEAD, origin remote and license file when present."""
    root = root.resolve()
    is_git = (root / ".git").exists() and _git(root, "rev-parse", "--show-toplevel") is not None
    url_base = None
    if is_git:
        commit = commit or _git(root, "rev-parse", "HEAD")
        remote = _git(root, "config", "--get", "remote.origin.url") or ""
        m = _REMOTE.search(remote)
        if m:
            repo = repo or f"{m.group(1)}/{m.group(2)}"
            url_base = f"https://github.com/{m.group(1)}/{m.group(2)}"
    spdx, lic_file = detect_dir(root)
    tree = SourceTree(
        repo=repo or root.name,
        root=root,
        commit=commit,
        license=normalize(license) or spdx,
        license_file=lic_file,
        priority=priority,
    )
    if url_base is None and tree.repo.count("/") == 1:
        url_base = f"https://github.com/{tree.repo}"
    tree.url_base = url_base
    if is_git:
        tree.dirty = bool(_git(root, "status", "--porcelain", "--untracked-files=no"))
    return tree
