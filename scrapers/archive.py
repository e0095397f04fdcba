"""Safe extraction of a repository tarball: only source and license files, no links, no escapes.

GitHub tarballs hold one top folder (`owner-repo-sha/`), which is stripped. Members with absolute
paths or `..` are refused (`unsafe_path`), links are not created (`symlink`), and an archive that
cannot be read to the end is reported as `unreadable_archive` (what was read is kept).
"""

from __future__ import annotations

import json
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from mgbench.scrapers.licenses import LICENSE_FILES
from mgbench.scrapers.tree import KERNEL_EXTS, PY_EXTS


@dataclass
class ExtractReport:
    files: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    error: str | None = None

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def _wanted(rel: PurePosixPath) -> bool:
    return rel.name.endswith(PY_EXTS + KERNEL_EXTS) or (len(rel.parts) == 1 and rel.name in LICENSE_FILES)


def extract_tarball(archive: Path, dest: Path, max_member: int = 20_000_000) -> ExtractReport:
    """Extract `archive` into `dest` once (a `.complete` marker records the report)."""
    marker = dest / ".complete"
    if marker.is_file():
        try:
            d = json.loads(marker.read_text())
            return ExtractReport(d["files"], d["skipped"], d.get("error"))
        except (OSError, ValueError, KeyError):
            pass
    rep = ExtractReport()
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    try:
        with tarfile.open(archive, "r:*") as tf:
            for m in tf:
                parts = PurePosixPath(m.name).parts
                if len(parts) < 2:
                    continue
                rel = PurePosixPath(*parts[1:])
                if m.isdir():
                    continue
                if not _wanted(rel):
                    continue
                if m.name.startswith("/") or ".." in rel.parts:
                    rep.skip("unsafe_path")
                    continue
                if m.issym() or m.islnk():
                    rep.skip("symlink")
                    continue
                if not m.isfile():
                    rep.skip("special_file")
                    continue
                if m.size > max_member:
                    rep.skip("too_large")
                    continue
                target = (root / rel).resolve()
                if root not in target.parents:
                    rep.skip("unsafe_path")
                    continue
                src = tf.extractfile(m)
                if src is None:
                    rep.skip("unreadable")
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(src.read())
                rep.files += 1
    except (tarfile.TarError, EOFError, zlib.error, OSError) as e:
        rep.error = f"{type(e).__name__}: {e}"
        rep.skip("unreadable_archive")
    marker.write_text(json.dumps({"files": rep.files, "skipped": rep.skipped, "error": rep.error}))
    return rep
