"""pytest plugin for the adversarial suites on a lent GPU machine (the `suites` phase of
benchmarks/cuda_shared_pass.sh): each test's outcome is appended as one JSON line the moment it is known,
and tests that passed or skipped in earlier files on the same judge are not run again.

    MGBENCH_OUTCOMES=FILE                  append one line per test: nodeid, outcome, reason, seconds, judge,
                                           backend (MGBENCH_TEST_EVAL_BACKEND, the suites' eval backend), device
    MGBENCH_OUTCOMES_DONE="GLOB[ GLOB...]" earlier outcome files; a test whose line there says passed or
                                           skipped under today's judge digest and backend is deselected
    MGBENCH_SHARD=I/N                      run only shard I (0-based) of N of the tests left: every N-th
                                           from the I-th, so N pytest processes started together run each
                                           test once (one outcome file may take all N: a line is one write)

    PYTHONPATH=. MGBENCH_OUTCOMES=out.jsonl python3 -m pytest -p benchmarks.pytest_outcomes tests/test_eval_cheats.py

Why: on one H100 the two suites take about 19 s a test, longer than a 10-minute call. A call cut off by
its time limit ends pytest before its summary, so the reason of a failure printed only there is lost
(pass 11); and the next call must run only what is left. `judge` is a digest of the code that judges
(JUDGE_FILES): an outcome of another judge, or of another backend (a CPU dry run), is never taken as done.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
# the judge and what the suites assert: a change to any of these makes earlier outcomes stale
JUDGE_FILES = ("validation/**/*.py", "mgbench/*.py", "tests/test_eval_*.py", "tests/conftest.py")
DONE_OUTCOMES = ("passed", "skipped")
REASON_CHARS = 2000


def judge_digest(root: Path = REPO) -> str:
    """sha256 (16 hex digits) over the paths and bytes of the JUDGE_FILES under root."""
    h = hashlib.sha256()
    files = sorted({p for pattern in JUDGE_FILES for p in root.glob(pattern) if p.is_file()})
    for path in files:
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def done_nodeids(patterns: str, judge: str, backend: str = "") -> set[str]:
    """Node ids whose latest line over the files matching patterns says passed or skipped under judge and
    backend."""
    latest: dict[str, str] = {}
    for pattern in patterns.split():
        for name in sorted(glob.glob(pattern)):
            for line in Path(name).read_text().splitlines():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a killed call
                if rec.get("judge") == judge and rec.get("backend", "") == backend and "nodeid" in rec:
                    latest[rec["nodeid"]] = rec.get("outcome", "")
    return {nodeid for nodeid, outcome in latest.items() if outcome in DONE_OUTCOMES}


def parse_shard(text: str) -> tuple[int, int] | None:
    """(index, count) of MGBENCH_SHARD's "I/N"; None when unset. A malformed value is a usage error."""
    if not text:
        return None
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise pytest.UsageError(f"MGBENCH_SHARD={text!r}: expected I/N, two integers") from None
    if not 0 <= index < count:
        raise pytest.UsageError(f"MGBENCH_SHARD={text!r}: need 0 <= I < N")
    return index, count


def _reason(report: pytest.TestReport) -> str:
    if report.passed:
        return ""
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])[:REASON_CHARS]
    return report.longreprtext[-REASON_CHARS:]


class Outcomes:
    def __init__(self, path: str, done: str, shard: str = "") -> None:
        self.path = path
        self.done = done
        self.shard = parse_shard(shard)
        self.judge = judge_digest()
        self.backend = os.environ.get("MGBENCH_TEST_EVAL_BACKEND", "")
        self.device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if self.done:
            done = done_nodeids(self.done, self.judge, self.backend)
            skip = [item for item in items if item.nodeid in done]
            if skip:
                config.hook.pytest_deselected(items=skip)
                items[:] = [item for item in items if item.nodeid not in done]
            print(
                f"\noutcomes: judge {self.judge}, backend {self.backend or '-'}; "
                f"{len(skip)} test(s) already passed or skipped on it, {len(items)} to run"
            )
        if self.shard is not None:
            index, count = self.shard
            other = [item for k, item in enumerate(items) if k % count != index]
            if other:
                config.hook.pytest_deselected(items=other)
            items[:] = [item for k, item in enumerate(items) if k % count == index]
            print(f"outcomes: shard {index}/{count}: {len(items)} test(s)")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # one line a test: its call, or the setup that failed or skipped it, or a teardown that failed
        if not (report.when == "call" or (report.when == "setup" and not report.passed) or report.failed):
            return
        rec: dict[str, Any] = {
            "nodeid": report.nodeid,
            "outcome": report.outcome,
            "when": report.when,
            "reason": _reason(report),
            "seconds": round(report.duration, 3),
            "judge": self.judge,
            "backend": self.backend,
            "device": self.device,
            "at": round(time.time(), 3),
        }
        with open(self.path, "a") as f:  # one write a line, flushed at close: a killed run keeps what ended
            f.write(json.dumps(rec) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get("MGBENCH_OUTCOMES")
    if path:
        done, shard = os.environ.get("MGBENCH_OUTCOMES_DONE", ""), os.environ.get("MGBENCH_SHARD", "")
        config.pluginmanager.register(Outcomes(path, done, shard), "mgbench_outcomes")
