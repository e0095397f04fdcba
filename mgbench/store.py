"""The ground floor's file formats: the task manifest and the append-only JSONL result stores.

Every stage (scrapers, generator, validation, dataset, the Inspect task) reads and writes these files
through this module only, so that no stage reaches into another for a file format. Standard library
only: validation imports it on GPU machines that have torch and nothing else.

The manifest (OUT/manifest.jsonl): one JSON object per line (sorted keys), sorted by task id; each
holds the task's spec fields plus `module` (the task module's path relative to the manifest) and
`content_hash`. It is rewritten whole, atomically (a temp file, then os.replace).

A result store (validation-*.jsonl, baselines.jsonl, harness.jsonl, eval-results.jsonl, ...): one
record per line, appended with one O_APPEND write + fsync; later lines supersede earlier ones. A
writer killed mid-line (SIGKILL, a full disk) leaves a fragment without its newline at the end of the
file; the next append starts on a fresh line so that only the fragment is lost, never the next record
too. The first reader to meet such an unreadable line moves it aside, once: its text is appended to
`<name>.torn` beside the store and the store rewritten without it (temp file + os.replace), with one
warning naming the file and line; later readers see a clean store. Appends and that rewrite hold an
exclusive flock on the store, so a record being appended is never taken for a torn one, and an append
that raced the rewrite lands in the new file.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: appends and repairs run unlocked
    fcntl = None  # type: ignore[assignment]

MANIFEST_NAME = "manifest.jsonl"
# Added by load_manifest for the reader's convenience (the module's path); never written to a file.
LOCAL_KEYS = ("_path",)


# ---- the manifest ---------------------------------------------------------------------------------


def manifest_file(path: Path | str) -> Path:
    """The manifest file `path` names: itself, or the manifest of the folder it is."""
    path = Path(path)
    return path / MANIFEST_NAME if path.is_dir() else path


def load_manifest(path: Path | str) -> list[dict[str, Any]]:
    """Manifest records of a manifest file or of the folder holding one, in file order; each gets
    `_path`, its module's path. A missing file or a bad line gives one line naming file and line."""
    path = manifest_file(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: manifest not found (run `mgbench generate` first)")
    recs = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                rec = json.loads(line)
                rec["_path"] = str(path.parent / rec["module"])
                rec["task_id"], rec["content_hash"]
            except (json.JSONDecodeError, KeyError) as e:
                raise ValueError(f"{path}:{i}: bad manifest line ({type(e).__name__}: {e})") from None
            recs.append(rec)
    return recs


def manifest_text(records: Iterable[dict[str, Any]]) -> str:
    """The manifest lines of `records` in the given order (keys sorted, LOCAL_KEYS left out)."""
    return "".join(
        json.dumps({k: v for k, v in r.items() if k not in LOCAL_KEYS}, sort_keys=True) + "\n" for r in records
    )


def write_manifest(path: Path | str, records: Iterable[dict[str, Any]]) -> None:
    """Write a manifest atomically (temp file + os.replace), its records sorted by task id."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(manifest_text(sorted(records, key=lambda r: r["task_id"])))
    os.replace(tmp, path)


# ---- the JSONL result stores ----------------------------------------------------------------------


TORN_SUFFIX = ".torn"


def torn_path(path: Path | str) -> Path:
    """Where the unreadable lines of a store are moved: `<name>.torn` beside it."""
    path = Path(path)
    return path.with_name(path.name + TORN_SUFFIX)


def append_jsonl(path: Path | str, record: dict[str, Any]) -> None:
    """Append one record atomically: a reader never sees half a line from a completed call."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(record, sort_keys=True) + "\n").encode()
    fd = _open_locked(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        if _ends_mid_line(fd):
            data = b"\n" + data
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _open_locked(path: Path, flags: int) -> int:
    """A descriptor of the file `path` names, opened with `flags` and holding an exclusive flock (released
    by closing it). A store replaced while this waited for the lock is opened again; on a file system
    without flock the descriptor comes back unlocked."""
    while True:
        fd = os.open(path, flags, 0o644)
        if fcntl is None:
            return fd
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            return fd
        try:
            now = os.stat(path)
        except FileNotFoundError:
            now = None
        mine = os.fstat(fd)
        if now is not None and (now.st_ino, now.st_dev) == (mine.st_ino, mine.st_dev):
            return fd
        os.close(fd)


def _ends_mid_line(fd: int) -> bool:
    """True when the file's last byte is not a newline (a torn record of a killed writer)."""
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def _readable(line: bytes) -> bool:
    """Whether a line of a store is blank or one JSON value."""
    if not line.strip():
        return True
    try:
        json.loads(line)
    except ValueError:  # JSONDecodeError, UnicodeDecodeError (a write torn inside a character)
        return False
    return True


def read_jsonl(path: Path | str, warn: bool = True) -> Iterator[dict[str, Any]]:
    """Records of a JSONL file. Unreadable lines (a torn write of a killed writer) are skipped, and once the
    file is read to its end moved aside (`set_aside_unreadable`), with one warning each naming file and
    line; where the store cannot be rewritten they are skipped with a warning on every read."""
    path = Path(path)
    if not path.exists():
        return
    unreadable = []
    with path.open("rb") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                unreadable.append(i)
                continue
            yield rec
    if not unreadable:
        return
    try:
        moved = set_aside_unreadable(path)
    except OSError:
        moved = None
    if not warn:
        return
    why = "an unreadable line (a torn write of a killed writer?)"
    for i in unreadable if moved is None else moved:
        done = f"skipping {why}" if moved is None else f"moved {why} to {torn_path(path)}"
        print(f"warning: {path}:{i}: {done}", file=sys.stderr)


def set_aside_unreadable(path: Path | str) -> list[int]:
    """Move a store's unreadable lines to `<name>.torn`, under the store's lock: the store without them is
    written to a temp file, their text appended to the .torn file (fsynced), then the temp file replaces
    the store (os.replace). Returns their line numbers (none: nothing changed). A crash in between leaves
    the text in both files, never in neither."""
    path = Path(path)
    fd = _open_locked(path, os.O_RDONLY)
    try:
        with os.fdopen(os.dup(fd), "rb") as f:
            lines = f.read().splitlines(keepends=True)
        torn = [i for i, line in enumerate(lines, 1) if not _readable(line)]
        if not torn:
            return []
        bad = set(torn)
        tmp = path.with_name(path.name + ".tmp")
        try:
            with tmp.open("wb") as f:
                f.writelines(line for i, line in enumerate(lines, 1) if i not in bad)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, os.fstat(fd).st_mode & 0o7777)
            with torn_path(path).open("ab") as f:
                f.writelines(lines[i - 1].rstrip(b"\n") + b"\n" for i in torn)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise
        return torn
    finally:
        os.close(fd)


def latest_by(path: Path | str, key: Callable[[dict[str, Any]], Any]) -> dict[Any, dict[str, Any]]:
    """The last record for each key (later lines supersede earlier ones)."""
    out: dict[Any, dict[str, Any]] = {}
    for rec in read_jsonl(path):
        out[key(rec)] = rec
    return out


def validation_key(rec: dict[str, Any]) -> tuple:
    """Identity of a validation record (validation-*.jsonl): task, module hash, world size, size class
    and backend; a later record with the same key supersedes an earlier one."""
    return (rec["task_id"], rec["content_hash"], rec["world_size"], rec["size"], rec["backend"])


def rewrite_jsonl(path: Path | str, records: Iterable[dict[str, Any]]) -> None:
    """Replace a result store by `records` atomically (temp file + os.replace): a compaction of superseded
    lines; a reader sees the old file or the new one, never a mix."""
    path = Path(path)
    # a fresh temporary name, created exclusively: a file or link planted at a fixed name is never written
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, path.stat().st_mode & 0o777 if path.exists() else 0o644)  # mkstemp's is 0600
        with os.fdopen(fd, "w") as f:
            f.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
