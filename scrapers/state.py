"""Per-repository scan state on disk (OUT/state/<owner>+<name>.jsonl), so runs over different
sources accumulate and the candidates / funnel are rebuilt over all of them every time.

Line 1 is the header (tree, funnel); then one line per unit ({"path", "unit"}); then kernels and
skips. This is a local cache: it holds extracted source, whatever the license, and is never published.
"""

from __future__ import annotations

import gzip
import json
import types
import typing
from dataclasses import asdict, fields, is_dataclass
from pathlib import Path
from typing import Any

from mgbench.scrapers.records import Funnel, KernelEntry, Unit
from mgbench.scrapers.scan import ScanResult
from mgbench.scrapers.tree import SourceTree

STATE_VERSION = 1


def from_dict(cls: Any, d: Any) -> Any:
    """Rebuild a (nested) dataclass from asdict() output."""
    if d is None:
        return None
    if is_dataclass(cls):
        hints = typing.get_type_hints(cls)
        return cls(**{f.name: from_dict(hints[f.name], d[f.name]) for f in fields(cls) if f.name in d})
    origin = typing.get_origin(cls)
    if origin in (list, tuple):
        (arg, *_) = typing.get_args(cls) or (Any,)
        return [from_dict(arg, x) for x in d]
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(cls):
            if arg is type(None):
                continue
            if is_dataclass(arg) and isinstance(d, dict):
                return from_dict(arg, d)
        return d
    return d


def slug(repo: str) -> str:
    return repo.replace("/", "+").replace(" ", "_")


def save(state_dir: Path, scan: ScanResult) -> Path:
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / f"{slug(scan.tree.repo)}.jsonl.gz"
    tmp = path.with_suffix(".tmp")
    tree = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(scan.tree).items()}
    with gzip.open(tmp, "wt") as f:
        f.write(
            json.dumps(
                {"version": STATE_VERSION, "tree": tree, "funnel": asdict(scan.funnel), "cpu_seconds": scan.cpu_seconds}
            )
            + "\n"
        )
        for p, u in scan.units:
            f.write(json.dumps({"path": p, "unit": asdict(u)}) + "\n")
        for k in scan.kernels:
            f.write(json.dumps({"kernel": asdict(k)}) + "\n")
        for s in scan.skips:
            f.write(json.dumps({"skip": s}) + "\n")
    tmp.replace(path)
    return path


def load(path: Path) -> ScanResult | None:
    try:
        with gzip.open(path, "rt") as f:
            head = json.loads(f.readline())
            if head.get("version") != STATE_VERSION:
                return None
            t = head["tree"]
            tree = from_dict(SourceTree, {**t, "root": Path(t["root"])})
            tree.root = Path(t["root"])
            scan = ScanResult(tree, from_dict(Funnel, head["funnel"]), cpu_seconds=head.get("cpu_seconds", 0.0))
            for line in f:
                rec = json.loads(line)
                if "unit" in rec:
                    scan.units.append((rec["path"], from_dict(Unit, rec["unit"])))
                elif "kernel" in rec:
                    scan.kernels.append(from_dict(KernelEntry, rec["kernel"]))
                elif "skip" in rec:
                    scan.skips.append(rec["skip"])
            return scan
    except (OSError, ValueError, KeyError, TypeError, EOFError):
        return None


def load_all(state_dir: Path) -> list[ScanResult]:
    out = []
    for p in sorted(state_dir.glob("*.jsonl.gz")):
        s = load(p)
        if s is not None:
            out.append(s)
    return out
