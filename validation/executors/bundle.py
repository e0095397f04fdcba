"""Shards that carry their files, for engines whose workers share no file system with the driver
(Ray): pack() puts the task modules (validate) or solution files (eval) into the payload; on the
worker, unpack() writes them under a temporary folder and returns the shard pointed there; run_packed()
runs it in a subprocess and returns the result records, with the original file paths restored.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from mgbench.store import MANIFEST_NAME, load_manifest, manifest_text, read_jsonl
from mgbench.validation.executors.runner import child_env
from mgbench.validation.executors.shard import Shard


def pack(shard: Shard) -> dict[str, Any]:
    """{"shard": fields, "files": {relative path: text}}."""
    files: dict[str, str] = {}
    if shard.kind == "validate":
        wanted = set(shard.items)
        recs = [rec for rec in load_manifest(shard.source) if rec["task_id"] in wanted]
        for rec in recs:
            files[rec["module"]] = Path(rec["_path"]).read_text()
        files[MANIFEST_NAME] = manifest_text(recs)
    else:
        for p in shard.items:
            files[Path(p).name] = Path(p).read_text()
    return {"shard": asdict(shard), "files": files}


def unpack(payload: dict[str, Any], tag: str = "") -> Shard:
    """Write the payload's files under a folder named after the shard (the same path on every node of
    a wide shard) and return the shard reading from there, its results going to a part file there."""
    shard = Shard(**payload["shard"])
    root = Path(tempfile.gettempdir()) / f"mgbench-{shard.name}{tag}"
    for rel, text in payload["files"].items():
        dest = root / "src" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}")
        tmp.write_text(text)
        tmp.replace(dest)
    items = shard.items if shard.kind == "validate" else [str(root / "src" / Path(p).name) for p in shard.items]
    return replace(shard, source=str(root / "src"), items=items, results=str(root / "results.jsonl"))


def run_module(module: str, stdin: str, log: Path) -> None:
    """`python -m module` with `stdin`; raise RuntimeError with the log's tail when it fails."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as f:
        rc = subprocess.run(
            [sys.executable, "-m", module], input=stdin, text=True, stdout=f, stderr=subprocess.STDOUT, env=child_env()
        ).returncode
    if rc != 0:
        tail = log.read_text().strip().splitlines()[-3:]
        raise RuntimeError(f"{module} exited with {rc}: {' | '.join(tail)}")


def records_of(local: Shard, original: Shard) -> list[dict[str, Any]]:
    """The records of the local shard's part file, with eval sample paths mapped back."""
    paths = {Path(p).name: p for p in original.items}
    out = []
    for rec in read_jsonl(local.part):
        if "sample_path" in rec:
            rec["sample_path"] = paths.get(Path(rec["sample_path"]).name, rec["sample_path"])
        out.append(rec)
    return out


def run_packed(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Run a packed narrow shard here (in a subprocess); its result records."""
    local = unpack(payload)
    run_module("mgbench.validation.executors.runner", local.to_json(), local.part.with_suffix(".log"))
    return records_of(local, Shard(**payload["shard"]))


def run_packed_node(
    payload: dict[str, Any], node: int, nodes: int, head: str, port: int, authkey: str
) -> list[dict[str, Any]]:
    """Run one node's part of a packed wide shard (mgbench.validation.executors.cluster); node 0 returns the records."""
    local = unpack(payload, tag=f"-{authkey[:8]}")
    spec = {"shard": asdict(local), "node": node, "nodes": nodes, "head": head, "port": port, "authkey": authkey}
    run_module("mgbench.validation.executors.cluster", json.dumps(spec), local.part.with_name(f"node{node}.log"))
    return records_of(local, Shard(**payload["shard"])) if node == 0 else []
