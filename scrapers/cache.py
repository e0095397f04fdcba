"""On-disk cache of API answers (JSON) and downloaded archives, so a re-run makes no requests."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


class DiskCache:
    """Namespaced key -> JSON value store under `root`, plus blob paths for archives."""

    def __init__(self, root: Path | str, refresh: bool = False):
        self.root = Path(root)
        self.refresh = refresh  # ignore cached JSON answers (blobs are content-addressed: kept)
        self.hits = 0
        self.misses = 0

    def _path(self, ns: str, key: str) -> Path:
        h = hashlib.sha256(key.encode()).hexdigest()
        return self.root / ns / h[:2] / f"{h}.json"

    def get(self, ns: str, key: str) -> Any | None:
        p = self._path(ns, key)
        if self.refresh or not p.is_file():
            self.misses += 1
            return None
        try:
            rec = json.loads(p.read_text())
        except (OSError, ValueError):
            self.misses += 1
            return None
        if rec.get("key") != key:
            self.misses += 1
            return None
        self.hits += 1
        return rec["value"]

    def put(self, ns: str, key: str, value: Any) -> None:
        p = self._path(ns, key)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"key": key, "value": value}))
        tmp.replace(p)

    def blob(self, ns: str, name: str) -> Path:
        p = self.root / ns / name
        p.parent.mkdir(parents=True, exist_ok=True)
        return p
