"""`mgbench scrape crosscheck`: level-4 outputs on another pool agree with the recorded gloo fingerprints,
a wrong record is reported, and a re-run resumes from the JSONL."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from mgbench.scrapers.harness.run.crosscheck import run
from mgbench.scrapers.harness.run.probe import fingerprint

pytestmark = pytest.mark.sandboxed  # runs candidates or tasks through child rank processes


TASK = """import torch
import torch.distributed as dist
SIZES = {"smoke": {"n": 8}, "full": {"n": 1024}}
def make_inputs(rank, world_size, *, seed, device, size="smoke"):
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    return (torch.randn(SIZES[size]["n"], generator=g).to(device),)
def solution(x):
    y = x * 2
    dist.all_reduce(y)
    return y
"""


def _expected(ws: int) -> list[dict]:
    xs = [torch.randn(8, generator=torch.Generator().manual_seed(r)) for r in range(ws)]
    y = sum(x * 2 for x in xs)
    return [fingerprint(y) for _ in range(ws)]


def _manifest(tmp: Path, fps: dict) -> Path:
    (tmp / "tasks").mkdir(parents=True, exist_ok=True)
    (tmp / "tasks" / "l4_demo.py").write_text(TASK)
    rec = {
        "task_id": "l4_demo",
        "module": "tasks/l4_demo.py",
        "level": 4,
        "world_sizes": [2],
        "content_hash": hashlib.sha256(TASK.encode()).hexdigest(),
        "harness_fingerprints": fps,
        "provenance": {"repository": "example/repo"},
    }
    (tmp / "manifest.jsonl").write_text(json.dumps(rec) + "\n")
    return tmp


def test_agreeing_record_then_resume(tmp_path: Path) -> None:
    out = _manifest(tmp_path, {"ws2": _expected(2)})
    recs = run(out, 2, "gloo", quiet=True)
    assert [r["agree"] for r in recs] == [True], recs
    again = run(out, 2, "gloo", quiet=True)  # resumed: no new line
    assert again == recs
    assert len((out / "results" / "crosscheck-gloo.jsonl").read_text().splitlines()) == 1


def test_wrong_record_is_reported(tmp_path: Path) -> None:
    fps = _expected(2)
    fps[1]["sum"] += 1.0
    recs = run(_manifest(tmp_path, {"ws2": fps}), 2, "gloo", quiet=True)
    assert not recs[0]["agree"] and "rank 1" in recs[0]["reason"] and "sum" in recs[0]["reason"]


def test_missing_world_size_record(tmp_path: Path) -> None:
    recs = run(_manifest(tmp_path, {}), 2, "gloo", quiet=True)
    assert not recs[0]["agree"] and "no gloo fingerprint" in recs[0]["reason"]
