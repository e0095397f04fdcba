"""benchmarks/file_call.py: one command files a lent-machine call's files into a results folder (records
as publish reads them, suites outcomes and logs apart), never twice, and a bad file is named, not filed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("file_call", REPO / "benchmarks" / "file_call.py")
file_call = importlib.util.module_from_spec(spec)
spec.loader.exec_module(file_call)

RECORD = {"backend": "shared-gpu", "size": "full", "content_hash": "h", "hardware": "NVIDIA H100 80GB HBM3"}


def _call_dir(root: Path) -> Path:
    call = root / "device" / "3"
    (call / "pass").mkdir(parents=True)
    rows = [
        {**RECORD, "task_id": "a", "world_size": 8, "status": "passed", "reason": ""},
        {**RECORD, "task_id": "b", "world_size": 8, "status": "failed", "reason": "error: OutOfMemoryError"},
    ]
    (call / "pass" / "ws8.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (call / "pass" / "suites.jsonl").write_text(json.dumps({"nodeid": "t::x", "outcome": "passed"}) + "\n")
    (call / "pass" / "call.log").write_text("== ws8 (500 s left)\n")
    (call / "insp").mkdir()
    (call / "insp" / "inspect.eval").write_text("zip")
    return call


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_call_is_filed_by_file_name_and_filing_it_again_adds_nothing(tmp_path, capsys):
    call, folder = _call_dir(tmp_path), tmp_path / "results" / "cuda-shared-x"
    assert file_call.main([str(call), str(folder), "--tag", "call3"]) == 0
    out = capsys.readouterr().out
    assert "1 passed, 1 failed" in out and "inspect.eval: not filed (no filing rule" in out
    assert [r["task_id"] for r in _lines(folder / "validation-shared-gpu.jsonl")] == ["a"]
    assert [r["task_id"] for r in _lines(folder / "failures.jsonl")] == ["b"]
    assert _lines(folder / "suites" / "call3.jsonl")[0]["nodeid"] == "t::x"
    assert (folder / "logs" / "call3.log").read_text().startswith("== ws8")
    assert not list(folder.glob("suites.jsonl"))  # never beside the records, whose glob reads every *.jsonl
    # the next call's --done glob reads every *.jsonl of the folder as records: the ledger is not one of them
    assert all("task_id" in r for path in folder.glob("*.jsonl") for r in _lines(path))

    assert file_call.main([str(call), str(folder), "--tag", "call3"]) == 0
    assert capsys.readouterr().out.count("already filed") == 3
    assert len(_lines(folder / "validation-shared-gpu.jsonl")) == 1


def test_a_file_that_is_no_record_is_named_and_nothing_of_it_is_filed(tmp_path, capsys):
    call, folder = _call_dir(tmp_path), tmp_path / "results" / "cuda-shared-x"
    (call / "pass" / "ws4.jsonl").write_text(json.dumps({**RECORD, "task_id": "c", "status": "passed"}) + "\n")
    assert file_call.main([str(call), str(folder)]) == 1
    out = capsys.readouterr().out
    assert "ws4.jsonl: not filed: ValueError: line 1 is no validation record (no world_size)" in out
    assert [r["task_id"] for r in _lines(folder / "validation-shared-gpu.jsonl")] == ["a"]  # ws8 still filed
    assert (folder / "suites" / "call-3.jsonl").exists()  # default tag: the call folder's name


def test_a_missing_call_folder_is_one_clear_line(tmp_path, capsys):
    assert file_call.main([str(tmp_path / "nowhere"), str(tmp_path / "r")]) == 2
    assert "nowhere: not a folder" in capsys.readouterr().err


def test_a_resumed_held_out_run_appends_only_the_verdicts_the_folder_lacks(tmp_path, capsys):
    """A heldout phase seeded with the folder's verdicts (HELDOUT_SEED) returns them with the new ones."""
    folder = tmp_path / "results" / "cuda-shared-x"
    old = [{"sample": f"c{k}.py", "task_id": "t", "world_size": 2, "status": "incorrect"} for k in range(2)]
    first, second = tmp_path / "call1", tmp_path / "call2"
    first.mkdir()
    second.mkdir()
    (first / "heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    new = {"sample": "c2.py", "task_id": "t", "world_size": 2, "status": "correct"}
    (second / "heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*old, new]))
    assert file_call.main([str(first), str(folder), "--tag", "call1"]) == 0
    assert file_call.main([str(second), str(folder), "--tag", "call2"]) == 0
    assert "1 line(s) appended (2 already there)" in capsys.readouterr().out
    assert [r["sample"] for r in _lines(folder / "heldout.jsonl")] == ["c0.py", "c1.py", "c2.py"]


def test_held_out_triggers_are_appended_beside_the_verdicts(tmp_path):
    folder = tmp_path / "results" / "cuda-shared-x"
    call = tmp_path / "call1"
    call.mkdir()
    (call / "heldout-fired.jsonl").write_text(json.dumps({"sample": "c0.py", "fired": False}) + "\n")
    assert file_call.main([str(call), str(folder), "--tag", "call1"]) == 0
    assert _lines(folder / "heldout-fired.jsonl") == [{"sample": "c0.py", "fired": False}]
