"""The JSONL result stores: a record torn by a killed writer costs that record only, never the next one."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings, strategies as st

from validation.store import append_jsonl, latest_by, read_jsonl

REPO = Path(__file__).resolve().parents[1]

# A writer that appends one whole record, then the first half of a second one (a single write, like a
# kill or a full disk between the two halves of a line), says so and waits to be killed.
TORN_WRITER = """
import json, os, sys, time
from validation.store import append_jsonl
path = sys.argv[1]
append_jsonl(path, {"task_id": "a", "status": "passed"})
line = json.dumps({"task_id": "b", "status": "passed", "pad": "x" * 4000}) + "\\n"
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
os.write(fd, line[: len(line) // 2].encode())
os.fsync(fd)
print("torn", flush=True)
time.sleep(60)
"""


def test_writer_killed_mid_line_loses_only_its_own_record(tmp_path):
    store = tmp_path / "results.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", TORN_WRITER, str(store)], stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "torn"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not store.read_bytes().endswith(b"\n")          # the kill left a fragment
    append_jsonl(store, {"task_id": "b", "status": "passed", "retry": 1})     # the task is redone once
    append_jsonl(store, {"task_id": "c", "status": "failed"})
    latest = latest_by(store, lambda r: r["task_id"])
    assert sorted(latest) == ["a", "b", "c"]
    assert latest["b"]["retry"] == 1
    assert len(list(read_jsonl(store, warn=False))) == 3   # only the fragment is unreadable


@settings(max_examples=40, deadline=None)
@given(cut=st.integers(min_value=1, max_value=200), records=st.integers(min_value=1, max_value=4))
def test_truncated_tail_then_append_keeps_every_whole_record(tmp_path_factory, cut, records):
    store = tmp_path_factory.mktemp("torn") / "r.jsonl"
    for i in range(records):
        append_jsonl(store, {"task_id": f"t{i}", "value": "v" * 50})
    data = store.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n") + 1           # start of the last record
    keep = min(last + cut, len(data) - 1)                  # cut inside the last record or just its newline
    store.write_bytes(data[:keep])
    append_jsonl(store, {"task_id": "next", "value": 1})
    got = [r["task_id"] for r in read_jsonl(store, warn=False)]
    whole = records if keep == len(data) - 1 else records - 1      # only the newline lost: still whole
    assert got == [f"t{i}" for i in range(whole)] + ["next"]


def test_append_to_an_intact_store_adds_no_blank_lines(tmp_path):
    store = tmp_path / "r.jsonl"
    for i in range(3):
        append_jsonl(store, {"i": i})
    assert store.read_text().splitlines() == [json.dumps({"i": i}) for i in range(3)]
