"""Parts of the Inspect task that need no evaluation: code extraction, the epochs' reducers against
`mgbench score`'s estimator, dataset filters, eval settings, the child-process deadline."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("inspect_ai", reason="inspect_ai is not installed (pip install -e '.[inspect]')")

from mgbench.inspect_eval.evaluator import EvalSettings, HarnessError, parse_record, run_child  # noqa: E402
from mgbench.inspect_eval.extract import as_code_block, extract_code  # noqa: E402
from mgbench.validation.eval import metrics as mg  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def test_extract_takes_the_last_python_block_and_skips_other_languages():
    text = "plan:\n```cuda\n__global__ void k() {}\n```\nfirst\n```python\na = 1\n```\nthen\n```py\nb = 2\n```\n"
    assert extract_code(text) == "b = 2\n"
    assert extract_code("```cuda\nint x;\n```\n```bash\nls\n```") is None
    assert extract_code("no code here") is None and extract_code("") is None and extract_code(None) is None
    assert extract_code("```python\n\n```") is None
    assert extract_code("```python\ndef solution(x):\n    return x\n") == "def solution(x):\n    return x\n"


@given(st.lists(st.text(alphabet="abcdefxyz_=+() \n:'\"", max_size=40), min_size=1, max_size=8))
def test_any_python_file_survives_a_code_block(lines):
    code = "\n".join(lines)
    if not code.strip():
        return
    assert extract_code(as_code_block(code)) == code.strip("\n") + "\n"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=3, max_size=3), min_size=1, max_size=6), st.integers(1, 3))
def test_inspect_pass_at_reducer_matches_mgbench_score_estimator(per_task, k):
    """Inspect's pass_at(k) over a task's epochs, averaged over tasks by our rates() metric, is the
    unbiased estimator `mgbench score` uses."""
    from inspect_ai.scorer import SampleScore, Score, pass_at

    from mgbench.inspect_eval.metrics import rates

    reducer, rate = pass_at(k), rates()
    reduced = [
        SampleScore(
            score=reducer([Score(value={"pass": int(c)}) for c in cs]),
            sample_id=i,
            sample_metadata={"level": 1, "dims": ["tensor"]},
        )
        for i, cs in enumerate(per_task)
    ]
    expected = mg.mean_over_tasks({str(i): [mg.Sample(c) for c in cs] for i, cs in enumerate(per_task)}, k)
    got = rate(reduced)
    assert got["pass"] == pytest.approx(expected) and got["dim tensor/pass"] == pytest.approx(expected)


def test_speedup_metric_is_the_geomean_of_correct_samples_per_group():
    from inspect_ai.scorer import SampleScore, Score

    from mgbench.inspect_eval.metrics import speedup

    def ss(level, dims, correct, sp):
        meta = {"counted_correct": correct, "counted_speedup": sp, "level": level, "dims": dims}
        return SampleScore(score=Score(value={"pass": int(correct)}, metadata=meta))

    got = speedup()(
        [
            ss(1, ["data"], True, 2.0),
            ss(2, ["data", "tensor"], True, 8.0),
            ss(2, ["tensor"], False, 100.0),
            ss(2, ["tensor"], True, None),
        ]
    )
    assert got["geomean_speedup"] == pytest.approx(4.0)
    assert got["level 1/geomean_speedup"] == pytest.approx(2.0)
    assert got["dim tensor/geomean_speedup"] == pytest.approx(8.0)
    assert "dim ?/geomean_speedup" not in got


def test_metrics_break_pass_and_speedup_down_by_tradeoff():
    """A sample's trade-off tags (dataset column -> sample metadata, eval record -> score metadata) give
    "tradeoff T" groups as dims give "dim X"; a sample without tags (an older dataset) counts in none."""
    from inspect_ai.scorer import SampleScore, Score

    from mgbench.inspect_eval.metrics import groups_of, rates, speedup
    from mgbench.taskrows import metadata_of

    assert groups_of({"level": 2, "dims": ["tensor"], "tradeoffs": ["overlap", "transfer.tma"]}) == [
        "all",
        "level 2",
        "dim tensor",
        "tradeoff overlap",
        "tradeoff transfer.tma",
    ]
    assert metadata_of({"task_id": "t", "dims": None})["tradeoffs"] == []
    meta = metadata_of({"task_id": "t", "level": 2, "dims": ["tensor"], "tradeoffs": ["overlap"]})

    def ss(correct, sp, tags):
        score_meta = {"counted_correct": correct, "counted_speedup": sp, "tradeoffs": tags}
        value = {"pass": float(correct), "fast_1": float(correct and sp > 1), "timed": 1.0}
        return SampleScore(score=Score(value=value, metadata=score_meta), sample_metadata={**meta, "tradeoffs": tags})

    scores = [ss(True, 4.0, ["overlap"]), ss(False, 1.0, ["overlap", "ordering"]), ss(True, 2.0, [])]
    got = rates()(scores)
    assert got["tradeoff overlap/pass"] == pytest.approx(0.5) and got["tradeoff ordering/pass"] == 0.0
    assert got["tradeoff overlap/fast_1"] == pytest.approx(0.5) and got["pass"] == pytest.approx(2 / 3)
    assert speedup()(scores)["tradeoff overlap/geomean_speedup"] == pytest.approx(4.0)
    assert not any(k.startswith("tradeoff ?") for k in got)


def test_epochs_reducers_follow_the_number_of_samples():
    from inspect_ai.scorer._reducer.registry import reducer_log_names

    from mgbench.inspect_eval.task import epochs_with_reducers

    assert reducer_log_names(epochs_with_reducers(1).reducer) == ["mean"]
    assert reducer_log_names(epochs_with_reducers(3).reducer) == ["mean", "pass_at_3"]
    assert reducer_log_names(epochs_with_reducers(12).reducer) == ["mean", "pass_at_5", "pass_at_10", "pass_at_12"]
    with pytest.raises(ValueError, match="epochs"):
        epochs_with_reducers(0)


def test_dataset_argument_errors_name_the_dataset(tmp_path, monkeypatch):
    from mgbench.inspect_eval.samples import DEFAULT_DATASET, resolve_dataset

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="mgbench-out/dataset: folder not found .run `mgbench build` first"):
        resolve_dataset(DEFAULT_DATASET)
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(ValueError, match="not a folder"):
        resolve_dataset("f.txt")
    with pytest.raises(ValueError, match="./nowhere: folder not found"):
        resolve_dataset("./nowhere")
    assert resolve_dataset("org/mgbench") == "org/mgbench"
    assert resolve_dataset(".") == str(tmp_path.resolve())


def test_filters_pick_tasks_by_level_pattern_and_world_size():
    from mgbench.inspect_eval.samples import _selected, to_sample

    row = {
        "task_id": "l2-gemm_rs-bf16",
        "level": 2,
        "world_sizes": [2, 4],
        "dims": ["tensor"],
        "prompt": {"cuda": "c", "triton": "t"},
    }
    assert _selected(row, [2], ["l2-*"], 2) and not _selected(row, [1], [], 2)
    assert not _selected(row, [], ["l1-*"], 2) and not _selected(row, [], [], 8)
    assert to_sample(row, "triton").input == "t" and to_sample(row, "triton").metadata["dims"] == ["tensor"]
    with pytest.raises(ValueError, match="l2-gemm_rs-bf16: no 'mojo' prompt"):
        to_sample(row, "mojo")


def test_eval_command_is_mgbench_eval_with_the_task_arguments(tmp_path):
    s = EvalSettings(
        dataset="/d",
        world_size=4,
        backend="gloo",
        trials=3,
        timing=False,
        hardware="h200x2",
        timeout=30,
        baselines=["/b/one.jsonl", "/b/two.jsonl"],
    )
    cmd = s.command("l1-x", tmp_path / "a.py", tmp_path / "r.jsonl")
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--baselines"] == ["/b/one.jsonl", "/b/two.jsonl"]
    assert cmd[:4] == [sys.executable, "-m", "mgbench.cli", "eval"]
    for flag, value in (
        ("--dataset", "/d"),
        ("--task", "l1-x"),
        ("--world-size", "4"),
        ("--trials", "3"),
        ("--hardware", "h200x2"),
        ("--timeout", "30"),
        ("--results", str(tmp_path / "r.jsonl")),
    ):
        assert cmd[cmd.index(flag) + 1] == value
    assert "--no-timing" in cmd and "--json" in cmd


def test_task_eval_backend_shared_gpu_reaches_the_mgbench_eval_command_line(tmp_path, monkeypatch):
    """-T eval_backend=shared-gpu is passed through to `mgbench eval --backend shared-gpu` (no GPU pool:
    the ranks share the visible GPUs); an unknown backend is refused when the task is made."""
    from inspect_ai.dataset import MemoryDataset, Sample

    from mgbench.inspect_eval import task as task_module

    seen = {}
    real_scorer = task_module.mgbench_eval

    def fake_scorer(fields, folder, run_id, results=None, protocol="zero_shot"):
        seen["fields"] = fields
        return real_scorer(fields, folder, run_id, results, protocol)

    monkeypatch.setattr(task_module, "load_samples", lambda *a, **k: MemoryDataset([Sample(id="l1-x", input="p")]))
    monkeypatch.setattr(task_module, "mgbench_eval", fake_scorer)
    (tmp_path / "ds").mkdir()
    t = task_module.mgbench(dataset=str(tmp_path / "ds"), eval_backend="shared-gpu", size="full", out=str(tmp_path))
    assert t.metadata["eval_backend"] == "shared-gpu"
    cmd = EvalSettings(**seen["fields"]).command("l1-x", tmp_path / "a.py", None)
    assert cmd[cmd.index("--backend") + 1] == "shared-gpu"
    assert cmd[cmd.index("--size") + 1] == "full"
    with pytest.raises(ValueError, match="eval_backend 'cuda'"):
        task_module.mgbench(dataset=str(tmp_path / "ds"), eval_backend="cuda", out=str(tmp_path))


@pytest.mark.parametrize(
    "backend, hardware, counted",
    [("shared-gpu", "2 ranks on 1x NVIDIA H100 80GB HBM3 (shared)", False), ("nccl", "2x NVIDIA H200", True)],
)
def test_a_speedup_the_scoring_rule_does_not_count_is_named_so_in_the_explanation(tmp_path, backend, hardware, counted):
    """A host-staged (shared-gpu) timing is shown with the reason it counts for nothing; an NCCL one is not."""
    from mgbench.inspect_eval.scorer import RunFiles, to_score

    rec = {
        "task_id": "l1-x",
        "status": "correct",
        "correct": True,
        "speedup": 1.7,
        "backend": backend,
        "size": "full",
        "hardware": hardware,
        "world_size": 2,
        "level": 1,
        "dims": ["collective"],
        "timing_on": True,
        "sample_hash": "h",
        "within_noise": False,
    }
    score = to_score(rec, "def solution(x): ...", RunFiles.create(tmp_path, "r"), tmp_path / "a.py")
    assert score.explanation.startswith("correct, speedup 1.7x over the reference")
    assert ("not a result" in score.explanation) is not counted
    assert score.value["pass"] == 1.0 and score.value["fast_1.5"] == float(counted)


def test_concurrency_is_bounded_by_gpus_or_cores(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7")
    assert EvalSettings(dataset="d", world_size=2, backend="nccl").concurrency() == 4
    assert EvalSettings(dataset="d", world_size=4, backend="nccl", max_evals=9).concurrency() == 2
    assert EvalSettings(dataset="d", world_size=2, backend="gloo", max_evals=3).concurrency() == 3
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert EvalSettings(dataset="d", world_size=2, backend="gloo").concurrency() == 5


def test_gpu_pool_lists_the_visible_devices_and_refuses_a_world_size_too_wide(monkeypatch):
    import anyio

    from mgbench.inspect_eval.evaluator import GpuPool, gpu_ids

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,4,5,6,7")
    assert gpu_ids() == ["3", "4", "5", "6", "7"]
    with pytest.raises(HarnessError, match="world size 8 needs 8 GPUs; 5 visible"):
        anyio.run(GpuPool(gpu_ids()).take, 8)


def test_a_child_past_its_deadline_is_killed_with_its_process_group(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    cmd = ["/bin/sh", "-c", f"sleep 300 & echo $! > {pidfile}; wait"]
    t0 = time.monotonic()
    code, _, _ = asyncio.run(run_child(cmd, dict(os.environ), 1.0))
    assert code is None and time.monotonic() - t0 < 30
    pid = int(pidfile.read_text())
    for _ in range(50):  # the grandchild (a rank process stand-in) is gone too
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split()[2] == "Z":
                break
        time.sleep(0.1)
    else:
        pytest.fail("grandchild still running")


def test_a_harness_failure_is_an_error_not_a_wrong_answer():
    with pytest.raises(HarnessError, match="unknown task"):
        parse_record(2, "", "mgbench eval: error: unknown task 'x'\n", ["mgbench"], 10)
    with pytest.raises(HarnessError, match="did not finish"):
        parse_record(None, "", "", ["mgbench"], 10)
    assert parse_record(1, '{"status": "incorrect", "correct": false}', "", [], 10)["status"] == "incorrect"


def test_the_entry_point_module_registers_the_task_and_the_scripted_provider():
    """pyproject's [project.entry-points.inspect_ai] names a module that registers the task `mgbench`
    (Inspect prefixes the package, `mgbench/`, when the distribution is installed) and the provider."""
    tomllib = pytest.importorskip("tomllib")
    from importlib import import_module

    conf = tomllib.loads((REPO / "pyproject.toml").read_text())
    target = conf["project"]["entry-points"]["inspect_ai"]["mgbench"]
    assert "mgbench.inspect_eval" in conf["tool"]["setuptools"]["packages"]
    module = import_module(target)
    from inspect_ai._util.registry import registry_info

    assert registry_info(module.mgbench).type == "task"
    assert registry_info(module.mgbench).name.split("/")[-1] == "mgbench"
    from inspect_ai.model import get_model

    assert get_model("mgbench_scripted/reference").api.model_name == "reference"
    with pytest.raises(ValueError, match="unknown mode"):
        get_model("mgbench_scripted/nonsense")


@pytest.mark.parametrize(
    "backend, gpus, sizes, max_evals, bound",
    [("gloo", None, [2], 2, 2), ("nccl", "0,1,2,3,4,5", [2], 9, 3), ("nccl", "0,1,2,3,4,5", [2, 4], 9, 3)],
)
def test_no_more_evaluations_run_at_once_than_allowed(monkeypatch, backend, gpus, sizes, max_evals, bound):
    """Concurrent evaluations stay within the bound; on NCCL the running ones hold disjoint GPUs, also
    when tasks of different world sizes share the run."""
    import anyio
    from inspect_ai.util._concurrency import init_concurrency

    from mgbench.inspect_eval import evaluator

    if gpus:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", gpus)
    init_concurrency()  # what Inspect does at the start of each run
    running: list[str] = []
    peak = []

    async def one(ws: int) -> None:
        settings = EvalSettings(dataset="d", world_size=ws, backend=backend, max_evals=max_evals)
        async with evaluator.eval_slot(settings) as env:
            held = env.get("CUDA_VISIBLE_DEVICES", "cpu")
            running.append(held)
            peak.append(len(running))
            if gpus:
                devices = [d for slot in running for d in slot.split(",")]
                assert len(devices) == len(set(devices)) and len(held.split(",")) == ws
            await anyio.sleep(0.02)
            running.remove(held)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(one, sizes[i % len(sizes)])

    anyio.run(main)
    assert max(peak) <= bound and len(peak) == 8
    if len(sizes) == 1:
        assert max(peak) == bound
