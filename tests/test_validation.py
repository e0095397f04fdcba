"""Validation on gloo: every core task passes at world sizes 2 and 4; broken tasks are caught."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import GOOD_SOLUTION, PLANTED_HEADER, write_planted

from mgbench.store import read_jsonl
from mgbench.validation.run import validate


@pytest.fixture(scope="module")
def core_results(core_tasks):
    res = validate(core_tasks, core_tasks / "results.jsonl", world_sizes=[2, 4], quiet=True)
    return res


def test_every_core_task_passes_at_ws_2_and_4(core_results, core_tasks):
    n_tasks = len((core_tasks / "manifest.jsonl").read_text().splitlines())
    assert n_tasks >= 30
    bad = [(r.task_id, r.world_size, r.reason) for r in core_results if r.status != "passed"]
    assert not bad
    assert {r.world_size for r in core_results} == {2, 4}
    assert len(core_results) == 2 * n_tasks


def test_records_say_where_a_checks_time_went(core_results):
    """Each record carries the seconds of the check's phases (the slowest rank's), so a full-size pass shows
    whether the inputs, the reference or the oracle dominate; the phases fit in the item's time."""
    for r in core_results:
        assert set(r.phase_seconds) == {"inputs", "reference", "other_seed", "oracle", "compare"}
        assert all(s >= 0 for s in r.phase_seconds.values())
        assert sum(r.phase_seconds.values()) <= r.seconds * r.world_size + 1e-3


def test_degenerate_outputs_fail_for_every_task(core_results):
    for r in core_results:
        for check in (
            "rejects_zeros",
            "rejects_other_seed",
            "rejects_input_insensitive",
            "inputs_not_mutated",
            "deterministic",
            "matches_oracle",
        ):
            assert r.checks[check] is True, (r.task_id, check)


def test_rerun_skips_passed(core_tasks, core_results):
    again = validate(core_tasks, core_tasks / "results.jsonl", world_sizes=[2, 4], quiet=True)
    assert again == []


BROKEN = {
    "wrong_math": GOOD_SOLUTION.replace("return y", "return y * 1.5"),
    "mutates": "\ndef solution(x):\n    dist.all_reduce(x)\n    return x.clone()\n",
    "zeros_out": "\ndef solution(x):\n    y = x.clone()\n    dist.all_reduce(y)\n    return torch.zeros_like(y)\n",
    "raises": "\ndef solution(x):\n    raise ValueError('planted failure')\n",
    "nondeterministic": "\nimport random\ndef solution(x):\n    y = x.clone()\n    dist.all_reduce(y)\n    "
    "return y + random.random()\n",
    "mismatched": "\ndef solution(x):\n    y = x.clone()\n    if dist.get_rank() == 0:\n        "
    "dist.recv(y, src=1)\n    return y\n",
    "size_mismatch": "\ndef solution(x):\n    y = x[: 8 * (1 + dist.get_rank())].clone()\n    "
    "dist.all_reduce(y)\n    return y\n",
    "good": GOOD_SOLUTION,
}


def test_broken_tasks_are_caught_and_run_goes_on(tmp_path):
    out = write_planted(tmp_path, {k: PLANTED_HEADER + v for k, v in BROKEN.items()})
    t0 = time.monotonic()
    res = {r.task_id: r for r in validate(out, out / "r.jsonl", world_sizes=[2], timeout_s=8, quiet=True)}
    assert time.monotonic() - t0 < 300  # 8 tasks, 8 s timeouts: bounded even on a loaded 2-core machine
    assert res["good"].status == "passed"
    assert "matches_oracle" in res["wrong_math"].reason
    assert "inputs_not_mutated" in res["mutates"].reason
    assert "matches_oracle" in res["zeros_out"].reason
    assert "planted failure" in res["raises"].reason
    assert "deterministic" in res["nondeterministic"].reason
    assert res["mismatched"].status == "failed" and res["mismatched"].reason.startswith("timeout")
    assert res["mismatched"].seconds < 8 + 5
    assert res["size_mismatch"].status == "failed"
    assert len(list(read_jsonl(out / "r.jsonl"))) == len(BROKEN)


def test_constant_task_is_rejected(tmp_path):
    src = (
        PLANTED_HEADER.replace('torch.randn(SIZES[size]["n"], generator=g)', 'torch.ones(SIZES[size]["n"])')
        + GOOD_SOLUTION
    )
    out = write_planted(tmp_path, {"constant": src})
    (r,) = validate(out, out / "r.jsonl", world_sizes=[2], quiet=True)
    assert r.status == "failed" and "do not depend on the inputs" in r.reason


def test_killed_validate_resumes_without_redoing(tmp_path, core_tasks):
    out = tmp_path / "o"
    out.mkdir()
    (out / "tasks").symlink_to(core_tasks / "tasks")
    (out / "manifest.jsonl").write_text((core_tasks / "manifest.jsonl").read_text())
    results = out / "results" / "validation-gloo.jsonl"
    cmd = [sys.executable, "-m", "mgbench.cli", "validate", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(read_jsonl(results, warn=False))) < 5:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = [r["task_id"] for r in read_jsonl(results, warn=False)]
    total = len((out / "manifest.jsonl").read_text().splitlines())
    assert 5 <= len(first) < total
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=300)
    ids = [r["task_id"] for r in read_jsonl(results, warn=False)]
    assert len(ids) == total and len(set(ids)) == total
    assert ids[: len(first)] == first


@pytest.mark.parametrize(
    "dtype, close, too_far, cap",
    [
        # float32: a reference 1.6% off its oracle is a bug, refused by the float32 ceiling (1e-2)
        ("float32", 0.004, 0.016, 0.01),
        # float16: its ceiling is 5e-2
        ("float16", 0.02, 0.035, 0.05),
    ],
)
def test_tolerance_margin_over_reference_error(tmp_path, dtype, close, too_far, cap):
    """A reference whose own error is under half its dtype's ceiling passes with the tolerance capped at
    the ceiling; one above half the ceiling is reported as an unsound tolerance, never calibrated in."""
    bump = (
        "\ndef solution(x):\n    y = x.clone()\n    dist.all_reduce(y)\n    y[0] += {} * "
        "y.float().pow(2).mean().sqrt()\n    return y\n"
    )
    header = PLANTED_HEADER.replace(".to(device),)", f".to(device=device, dtype=torch.{dtype}),)")
    out = write_planted(tmp_path, {"close": header + bump.format(close), "too_far": header + bump.format(too_far)})
    res = {r.task_id: r for r in validate(out, out / "r.jsonl", world_sizes=[2], quiet=True)}
    assert res["close"].status == "passed" and res["close"].tolerance["atol_rel"] == pytest.approx(cap)
    assert res["too_far"].status == "failed" and res["too_far"].checks["tolerance_sane"] is False


def test_tasks_offering_none_of_the_world_sizes_asked_are_bad_input_not_a_silent_pass(core_tasks, tmp_path):
    from mgbench.store import load_manifest

    task = load_manifest(core_tasks)[0]
    assert 3 not in task.get("world_sizes", [])
    with pytest.raises(
        ValueError, match=f"1 task\\(s\\) offer none of world size\\(s\\) 3: not run \\(e.g. {task['task_id']}: "
    ):
        validate(core_tasks, tmp_path / "r.jsonl", world_sizes=[3], task_ids=[task["task_id"]])
    assert not (tmp_path / "r.jsonl").exists()


def test_a_size_class_no_task_offers_is_bad_input_before_anything_runs(core_tasks, tmp_path):
    results = tmp_path / "r.jsonl"
    with pytest.raises(
        ValueError, match=r"manifest.jsonl: \d+ task\(s\) have no size class 'huge' .*--size smoke or full"
    ):
        validate(core_tasks, results, world_sizes=[2], size="huge")
    assert not results.exists()  # no failure record per task left behind to block publish
