"""Per-file result cache, so a re-scan only parses files whose content (or the scan settings, the
taxonomy or the extractor's own code) changed. Stored as OUT/state/<repo>.files.pkl: our own
FileResults, a local cache that is never published."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from pathlib import Path

from mgbench.scrapers.classify import TaxonomyIds
from mgbench.scrapers.records import FileResult

_CODE = (
    "ops",
    "resolve",
    "callscan",
    "cstwalk",
    "closure",
    "extract",
    "classify",
    "kernels",
    "dedup",
    "minhash",
    "worker",
    "records",
)


def settings_salt(facades: dict[str, str], repo_modules: dict[str, str], kernels: bool, tax: TaxonomyIds) -> str:
    """Everything besides a file's bytes that its FileResult depends on."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in _CODE:
        h.update((here / f"{name}.py").read_bytes())
    h.update(
        json.dumps(
            [
                sorted(facades.items()),
                sorted(repo_modules.items()),
                kernels,
                sorted(tax.dims),
                sorted(tax.workloads),
                sorted(tax.realizations),
                tax.families,
            ],
            sort_keys=True,
            default=str,
        ).encode()
    )
    return h.hexdigest()


def file_digest(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.blake2b(f.read(), digest_size=16).hexdigest()
    except OSError:
        return None


class FileCache:
    def __init__(self, path: Path | None, salt: str):
        self.path, self.salt = path, salt
        self.old: dict[str, tuple[str, FileResult]] = {}
        self.new: dict[str, tuple[str, FileResult]] = {}
        self.hits = 0
        if path is not None and path.is_file():
            try:
                with path.open("rb") as f:
                    saved = pickle.load(f)
                if saved.get("salt") == salt:
                    self.old = saved["files"]
            except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, KeyError, TypeError):
                self.old = {}

    def get(self, rel: str, digest: str | None) -> FileResult | None:
        hit = self.old.get(rel)
        if digest is None or hit is None or hit[0] != digest:
            return None
        self.hits += 1
        self.new[rel] = hit
        return hit[1]

    def put(self, rel: str, digest: str | None, res: FileResult) -> None:
        if digest is not None:
            self.new[rel] = (digest, res)

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + f".tmp{os.getpid()}")
        with tmp.open("wb") as f:
            pickle.dump({"salt": self.salt, "files": self.new}, f, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(self.path)
