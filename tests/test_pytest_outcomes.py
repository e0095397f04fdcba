"""benchmarks/pytest_outcomes.py: a test's outcome (and a failure's reason) is on file as soon as it ends,
and a second run skips what passed or skipped on the same judge, but not what ran on another."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("pytest_outcomes", REPO / "benchmarks" / "pytest_outcomes.py")
outcomes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(outcomes)
done_nodeids, judge_digest = outcomes.done_nodeids, outcomes.judge_digest
SUITE = """
import pytest

def test_ok():
    pass

def test_wrong():
    assert 1 + 1 == 3, "the verdict was correct"

@pytest.mark.skip(reason="not on this backend")
def test_skipped():
    pass
"""


def _run(folder: Path, outcomes: Path, done: str = "", shard: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "MGBENCH_OUTCOMES": str(outcomes), "MGBENCH_OUTCOMES_DONE": done}
    env.pop("MGBENCH_TEST_EVAL_BACKEND", None)
    env.pop("MGBENCH_SHARD", None)
    if shard:
        env["MGBENCH_SHARD"] = shard
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "benchmarks.pytest_outcomes",
            "suite.py",
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _lines(path: Path) -> dict[str, dict]:
    return {json.loads(line)["nodeid"]: json.loads(line) for line in path.read_text().splitlines()}


def test_each_outcome_is_filed_with_its_reason_and_a_rerun_runs_only_what_did_not_pass(tmp_path):
    (tmp_path / "suite.py").write_text(SUITE)
    first = tmp_path / "first.jsonl"
    res = _run(tmp_path, first)
    assert res.returncode == 1, res.stdout
    lines = _lines(first)
    assert {k: v["outcome"] for k, v in lines.items()} == {
        "suite.py::test_ok": "passed",
        "suite.py::test_wrong": "failed",
        "suite.py::test_skipped": "skipped",
    }
    assert "the verdict was correct" in lines["suite.py::test_wrong"]["reason"]
    assert "not on this backend" in lines["suite.py::test_skipped"]["reason"]
    assert {v["judge"] for v in lines.values()} == {judge_digest()}

    second = tmp_path / "second.jsonl"
    res = _run(tmp_path, second, done=str(tmp_path / "first*.jsonl"))
    assert "2 test(s) already passed or skipped on it, 1 to run" in res.stdout
    assert list(_lines(second)) == ["suite.py::test_wrong"]


def test_shards_run_every_test_left_exactly_once_and_a_bad_shard_is_a_usage_error(tmp_path):
    (tmp_path / "suite.py").write_text(SUITE + "".join(f"\ndef test_more_{k}():\n    pass\n" for k in range(4)))
    first = tmp_path / "first.jsonl"
    _run(tmp_path, first, shard="0/2")  # test_ok, test_skipped, test_more_1, test_more_3
    done, both = str(first), tmp_path / "both.jsonl"
    # what is left (the failure and the other shard's tests) split over two shards writing one file
    for k in range(2):
        res = _run(tmp_path, both, done=done, shard=f"{k}/2")
        assert f"shard {k}/2" in res.stdout
    ran = [json.loads(line)["nodeid"] for line in both.read_text().splitlines()]
    expected = {f"suite.py::test_more_{k}" for k in (0, 2)} | {"suite.py::test_wrong"}
    assert sorted(ran) == sorted(expected)  # each once, and nothing that passed or skipped before

    res = _run(tmp_path, tmp_path / "bad.jsonl", shard="2/2")
    assert res.returncode == 4 and "MGBENCH_SHARD='2/2': need 0 <= I < N" in res.stdout + res.stderr


def test_an_outcome_under_another_judge_or_backend_or_a_later_failure_is_not_done(tmp_path):
    judge = judge_digest()
    rows = [
        {"nodeid": "a", "outcome": "passed", "judge": judge},
        {"nodeid": "b", "outcome": "passed", "judge": "0" * 16},  # an older judge
        {"nodeid": "c", "outcome": "passed", "judge": judge},
        {"nodeid": "c", "outcome": "failed", "judge": judge},  # its teardown failed after the call passed
        {"nodeid": "e", "outcome": "passed", "judge": judge, "backend": "gloo"},  # a CPU dry run
    ]
    (tmp_path / "o.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"nodeid": "d", "outc')
    assert done_nodeids(str(tmp_path / "*.jsonl"), judge) == {"a"}
    assert done_nodeids(str(tmp_path / "*.jsonl"), judge, "gloo") == {"e"}


def test_the_judge_digest_follows_the_judge_files(tmp_path):
    (tmp_path / "validation" / "eval").mkdir(parents=True)
    (tmp_path / "validation" / "eval" / "verify.py").write_text("TOL = 1e-3\n")
    (tmp_path / "docs.md").write_text("a\n")
    before = judge_digest(tmp_path)
    (tmp_path / "docs.md").write_text("b\n")
    assert judge_digest(tmp_path) == before  # not a judge file
    (tmp_path / "validation" / "eval" / "verify.py").write_text("TOL = 1e-1\n")
    assert judge_digest(tmp_path) != before
