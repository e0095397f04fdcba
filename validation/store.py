"""Append-only JSONL result stores: one line per result, written with one O_APPEND write + fsync.

A writer killed mid-line (SIGKILL, a full disk) leaves a fragment without its newline at the end of
the file; the next append starts on a fresh line so that only the fragment is lost, never the next
record too (readers skip the fragment with a warning)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator


def append_jsonl(path: Path | str, record: dict[str, Any]) -> None:
    """Append one record atomically: a reader never sees half a line from a completed call."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(record, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        if _ends_mid_line(fd):
            data = b"\n" + data
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _ends_mid_line(fd: int) -> bool:
    """True when the file's last byte is not a newline (a torn record of a killed writer)."""
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def read_jsonl(path: Path | str, warn: bool = True) -> Iterator[dict[str, Any]]:
    """Records of a JSONL file; a torn last line (a killed writer) is skipped with a warning."""
    path = Path(path)
    if not path.exists():
        return
    with path.open() as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                if warn:
                    print(f"warning: {path}:{i}: skipping an unreadable line (a torn write of a killed "
                          "writer?)", file=sys.stderr)


def latest_by(path: Path | str, key: Callable[[dict[str, Any]], Any]) -> dict[Any, dict[str, Any]]:
    """The last record for each key (later lines supersede earlier ones)."""
    out: dict[Any, dict[str, Any]] = {}
    for rec in read_jsonl(path):
        out[key(rec)] = rec
    return out
