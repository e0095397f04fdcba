"""The ground floor's file formats (mgbench.store): a record torn by a killed writer costs that record
only, never the next one, and is moved aside to <name>.torn once, with one warning; the manifest
round-trips, is rewritten atomically and a bad one gives one line naming file and line; the module (and
the vocabulary beside it) needs the standard library alone, and validation torch alone."""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.generator.manifest import TaskRecord
from mgbench.store import append_jsonl, latest_by, load_manifest, read_jsonl, torn_path, write_manifest

REPO = Path(__file__).resolve().parents[1]

# A writer that appends one whole record, then the first half of a second one (a single write, like a
# kill or a full disk between the two halves of a line), says so and waits to be killed.
TORN_WRITER = """
import json, os, sys, time
from mgbench.store import append_jsonl
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
    proc = subprocess.Popen([sys.executable, "-c", TORN_WRITER, str(store)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "torn"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not store.read_bytes().endswith(b"\n")  # the kill left a fragment
    append_jsonl(store, {"task_id": "b", "status": "passed", "retry": 1})  # the task is redone once
    append_jsonl(store, {"task_id": "c", "status": "failed"})
    latest = latest_by(store, lambda r: r["task_id"])
    assert sorted(latest) == ["a", "b", "c"]
    assert latest["b"]["retry"] == 1
    assert len(list(read_jsonl(store, warn=False))) == 3  # only the fragment is unreadable


@settings(max_examples=40, deadline=None)
@given(cut=st.integers(min_value=1, max_value=200), records=st.integers(min_value=1, max_value=4))
def test_truncated_tail_then_append_keeps_every_whole_record(tmp_path_factory, cut, records):
    store = tmp_path_factory.mktemp("torn") / "r.jsonl"
    for i in range(records):
        append_jsonl(store, {"task_id": f"t{i}", "value": "v" * 50})
    data = store.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n") + 1  # start of the last record
    keep = min(last + cut, len(data) - 1)  # cut inside the last record or just its newline
    store.write_bytes(data[:keep])
    append_jsonl(store, {"task_id": "next", "value": 1})
    got = [r["task_id"] for r in read_jsonl(store, warn=False)]
    whole = records if keep == len(data) - 1 else records - 1  # only the newline lost: still whole
    assert got == [f"t{i}" for i in range(whole)] + ["next"]


def test_append_to_an_intact_store_adds_no_blank_lines(tmp_path):
    store = tmp_path / "r.jsonl"
    for i in range(3):
        append_jsonl(store, {"i": i})
    assert store.read_text().splitlines() == [json.dumps({"i": i}) for i in range(3)]


def _read(store):
    """(records, stderr lines) of one read of a store."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        recs = list(read_jsonl(store))
    return recs, err.getvalue().splitlines()


def _line(rec):
    return (json.dumps(rec, sort_keys=True) + "\n").encode()


values = st.text(max_size=12) | st.integers() | st.lists(st.booleans(), max_size=3)
records = st.lists(st.dictionaries(st.text("abc", min_size=1, max_size=3), values, max_size=3), max_size=4)


@settings(max_examples=60, deadline=None)
@given(before=records, torn=st.dictionaries(st.text("xyz", min_size=1, max_size=3), values, min_size=1), data=st.data())
def test_a_torn_last_line_is_moved_aside_once(tmp_path_factory, before, torn, data):
    """A killed writer's fragment (cut anywhere in its record, inside a UTF-8 character too) goes to
    <name>.torn on the first read, with one warning naming file and line; the store keeps exactly its whole
    records; the next read finds nothing to warn about and moves nothing again."""
    store = tmp_path_factory.mktemp("torn") / "r.jsonl"
    for rec in before:
        append_jsonl(store, rec)
    line = _line(torn)
    cut = data.draw(st.integers(min_value=1, max_value=len(line) - 2), label="cut")  # the newline and "}" lost
    with store.open("ab") as f:
        f.write(line[:cut])
    whole = store.read_bytes()[: -cut or None]

    recs, warnings = _read(store)
    assert recs == before
    assert warnings == [
        f"warning: {store}:{len(before) + 1}: moved an unreadable line (a torn write of a killed writer?) "
        f"to {torn_path(store)}"
    ]
    assert store.read_bytes() == whole
    assert torn_path(store).read_bytes() == line[:cut] + b"\n"
    assert sorted(p.name for p in store.parent.iterdir()) == ["r.jsonl", "r.jsonl.torn"]  # no temp file left

    assert _read(store) == (before, [])  # later runs: no warning
    assert torn_path(store).read_bytes() == line[:cut] + b"\n"
    append_jsonl(store, {"next": 1})
    assert store.read_bytes() == whole + _line({"next": 1})


@settings(max_examples=40, deadline=None)
@given(
    rounds=st.lists(st.tuples(records, st.integers(min_value=1, max_value=30)), min_size=1, max_size=4),
)
def test_fragments_left_inside_a_store_by_earlier_kills_are_moved_aside_in_order(tmp_path_factory, rounds):
    """Writers killed in several earlier runs whose stores were appended to since (each append starts a fresh
    line after the fragment): every fragment goes to .torn in file order, each record stays, in order."""
    store = tmp_path_factory.mktemp("kills") / "r.jsonl"
    kept, fragments = [], []
    for n, (recs, cut) in enumerate(rounds):
        for rec in recs:
            append_jsonl(store, rec)
        fragment = _line({"killed": n, "pad": "p" * 40})[:cut]
        with store.open("ab") as f:
            f.write(fragment)
        append_jsonl(store, {"after": n})
        kept += [*recs, {"after": n}]
        fragments.append(fragment + b"\n")
    recs, warnings = _read(store)
    assert recs == kept
    assert len(warnings) == len(rounds) and all("moved an unreadable line" in w for w in warnings)
    assert torn_path(store).read_bytes() == b"".join(fragments)
    assert store.read_bytes() == b"".join(map(_line, kept))
    assert _read(store) == (kept, [])


def test_a_store_that_cannot_be_rewritten_is_read_as_before(tmp_path):
    """Where the store cannot be rewritten (here its temp file's name is taken by a folder) the fragment is
    skipped with a warning on every read and nothing is changed."""
    store = tmp_path / "r.jsonl"
    append_jsonl(store, {"a": 1})
    with store.open("ab") as f:
        f.write(b'{"b": ')
    before = store.read_bytes()
    (tmp_path / "r.jsonl.tmp").mkdir()
    for _ in range(2):
        recs, warnings = _read(store)
        assert recs == [{"a": 1}]
        assert warnings == [f"warning: {store}:2: skipping an unreadable line (a torn write of a killed writer?)"]
    assert store.read_bytes() == before and not torn_path(store).exists()


def _locked(store):
    """A descriptor holding the store's lock, as an append or a set-aside in progress does."""
    fd = os.open(store, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def _waiting(thread):
    thread.start()
    time.sleep(0.3)
    assert thread.is_alive()  # blocked on the lock


def test_a_line_being_appended_is_not_taken_for_a_torn_one(tmp_path):
    """A reader that meets the first half of a record still being written waits for the writer's lock and
    finds the line whole: nothing is moved aside and nothing warned about."""
    store = tmp_path / "r.jsonl"
    append_jsonl(store, {"a": 1})
    line = _line({"b": 2, "pad": "x" * 100})
    fd = _locked(store)
    with store.open("ab") as f:
        f.write(line[:20])
    got = {}
    reader = threading.Thread(target=lambda: got.update(zip(("recs", "warnings"), _read(store))))
    _waiting(reader)
    with store.open("ab") as f:
        f.write(line[20:])
    os.close(fd)
    reader.join(30)
    assert got == {"recs": [{"a": 1}], "warnings": []}  # the record was not whole when it was read
    assert not torn_path(store).exists()
    assert list(read_jsonl(store)) == [{"a": 1}, {"b": 2, "pad": "x" * 100}]


def test_an_append_that_waited_for_a_set_aside_lands_in_the_new_store(tmp_path):
    store = tmp_path / "r.jsonl"
    append_jsonl(store, {"a": 1})
    fd = _locked(store)
    writer = threading.Thread(target=append_jsonl, args=(store, {"late": 1}))
    _waiting(writer)
    tmp = tmp_path / "r.jsonl.tmp"
    tmp.write_bytes(_line({"a": 1}))
    os.replace(tmp, store)  # what the set-aside does before it lets go of the old file's lock
    os.close(fd)
    writer.join(30)
    assert list(read_jsonl(store)) == [{"a": 1}, {"late": 1}]


# A child interpreter that refuses, to the modules named in CHECKED, every import of a top-level module
# that is neither in the standard library nor in ALLOWED (argv[1]); imports made by an allowed package
# (torch's own dependencies) pass. It imports argv[2:] (`pkg.*`: every module of pkg) and prints failures.
BLOCKED_IMPORTS = """
import importlib, importlib.abc, pkgutil, sys
ALLOWED = set(sys.argv[1].split(","))
CHECKED = {"mgbench", "__main__"}
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        top = fullname.partition(".")[0]
        if top in sys.stdlib_module_names or top in ALLOWED:
            return None
        f = sys._getframe(1)
        while f and f.f_globals.get("__name__", "").startswith(("importlib", "_frozen_importlib")):
            f = f.f_back
        importer = f.f_globals.get("__name__", "") if f else ""
        if importer.partition(".")[0] in CHECKED:
            raise ImportError(f"{importer} imports {fullname!r}")
sys.meta_path.insert(0, Blocker())
for name in sys.argv[2:]:
    mods = [name]
    if name.endswith(".*"):
        pkg = importlib.import_module(name[:-2])
        mods = [m.name for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
    for mod in mods:
        try:
            importlib.import_module(mod)
        except ImportError as e:
            print("blocked:", e)
"""


def _blocked_imports(allowed: str, *modules: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", BLOCKED_IMPORTS, allowed, *modules],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [line for line in proc.stdout.splitlines() if line.startswith("blocked:")]


def test_store_imports_with_the_standard_library_alone():
    modules = ("mgbench.store", "mgbench.distops", "mgbench.dtypes", "mgbench.taskfilter", "mgbench.report")
    assert _blocked_imports("mgbench", *modules) == []


def test_validation_imports_with_torch_and_the_standard_library_alone():
    assert _blocked_imports("torch,mgbench", "mgbench.validation.*") == []


def test_the_import_blocker_catches_a_third_party_import():
    # the Inspect task modules import inspect_ai at their top: the same child must refuse them
    assert any("inspect_ai" in line for line in _blocked_imports("torch,mgbench", "mgbench.inspect_eval.task"))


def test_dataset_build_reads_files_without_the_validation_stage():
    code = "import sys, mgbench.dataset.build; print(sorted(m for m in sys.modules if 'validation' in m))"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    # mgbench.validation.topology renders a machine's topology for the card: a validation fact, not a file format
    assert proc.stdout.split("\n")[0] == "['mgbench.validation', 'mgbench.validation.topology']"


entries = st.dictionaries(
    st.sampled_from(["level", "family", "dtype", "world_sizes"]),
    st.integers() | st.text(max_size=5) | st.lists(st.integers(), max_size=3),
)


@settings(max_examples=40, deadline=None)
@given(specs=st.dictionaries(st.text("abc-", min_size=1, max_size=6), entries, min_size=1, max_size=6))
def test_manifest_round_trips_sorted_by_task_id(tmp_path_factory, specs):
    out = tmp_path_factory.mktemp("m")
    records = [TaskRecord({**spec, "task_id": tid}, f"tasks/{tid}.py", "h" + tid) for tid, spec in specs.items()]
    write_manifest(out / "manifest.jsonl", [r.entry() for r in reversed(records)])
    loaded = load_manifest(out)  # the folder names its manifest.jsonl
    assert [r["task_id"] for r in loaded] == sorted(specs)
    assert [TaskRecord.from_entry(r) for r in loaded] == sorted(records, key=lambda r: r.task_id)
    assert all(r["_path"] == str(out / r["module"]) for r in loaded)
    assert [p.name for p in out.iterdir()] == ["manifest.jsonl"]  # no temp file left behind
    again = out / "again.jsonl"
    write_manifest(again, loaded)  # the reader's _path is never written
    assert again.read_bytes() == (out / "manifest.jsonl").read_bytes()


def test_failed_manifest_write_keeps_the_old_manifest(tmp_path):
    path = tmp_path / "manifest.jsonl"
    write_manifest(path, [{"task_id": "a", "module": "tasks/a.py", "content_hash": "h"}])
    before = path.read_bytes()
    with pytest.raises(TypeError):
        write_manifest(path, [{"task_id": "b", "module": "tasks/b.py", "content_hash": "h", "x": object()}])
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "line, reason",
    [
        ('{"task_id": "a", "module": "tasks/a.py"', "JSONDecodeError"),
        ('{"task_id": "a", "content_hash": "h"}', "KeyError: 'module'"),
        ('{"module": "tasks/a.py", "content_hash": "h"}', "KeyError: 'task_id'"),
        ('{"task_id": "a", "module": "tasks/a.py"}', "KeyError: 'content_hash'"),
    ],
)
def test_bad_manifest_line_names_file_and_line(tmp_path, line, reason):
    path = tmp_path / "manifest.jsonl"
    path.write_text('{"task_id": "ok", "module": "tasks/ok.py", "content_hash": "h"}\n\n' + line + "\n")
    with pytest.raises(ValueError) as e:
        load_manifest(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}:3: bad manifest line (") and reason in msg


def test_missing_manifest_says_how_to_make_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="manifest.jsonl: manifest not found .run `mgbench generate"):
        load_manifest(tmp_path)
