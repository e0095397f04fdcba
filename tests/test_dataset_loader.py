"""mgbench.dataset.loader: Task objects from load_dataset that write, import-check and run their module in
child processes; and `mgbench eval` accepts each row's reference as a candidate."""

from __future__ import annotations

import sys

import pytest
from dataset_helpers import mgbench, small_out


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from mgbench.dataset.build import write_dataset

    out = small_out(tmp_path_factory.mktemp("ld"))
    return write_dataset(out, out / "dataset", [], results_roots=[out / "results"]).folder


@pytest.fixture(scope="module")
def tasks(folder):
    from mgbench.dataset.loader import load_tasks

    return load_tasks(folder)


def test_load_tasks_every_split_and_one(folder, tasks):
    from mgbench.dataset.loader import load_tasks

    level2 = load_tasks(folder, split="level2")
    assert [t.task_id for t in level2] == [t.task_id for t in tasks if t.level == 2]
    assert len(tasks) == len({t.task_id for t in tasks}) > len(level2) > 0
    t = tasks[0]
    assert t.sizes["smoke"] and set(t.prompt) == {"cuda", "triton"} and t.row["baselines"]


def test_write_checks_the_content_hash(tasks, tmp_path):
    from mgbench.dataset.loader import TaskError

    t = tasks[0]
    path = t.write(tmp_path)
    assert path == tmp_path / f"{t.task_id}.py" and path.read_text() == t.source
    t.source += "\n# tampered\n"
    try:
        with pytest.raises(TaskError, match="content_hash"):
            t.write(tmp_path)
    finally:
        t.source = t.source.removesuffix("\n# tampered\n")


def test_check_import_runs_in_a_child(tasks):
    from mgbench.dataset.loader import Task, TaskError

    before = set(sys.modules)
    t = tasks[-1]
    t.check_import()
    assert not [m for m in set(sys.modules) - before if m.startswith("mgbench_task_")]
    broken_src = t.source.replace("def solution(", "def not_the_solution(")
    broken = Task.from_row(
        {**t.row, "source": broken_src, "content_hash": __import__("hashlib").sha256(broken_src.encode()).hexdigest()}
    )
    with pytest.raises(TaskError, match="missing 'solution'"):
        broken.check_import()


def test_run_in_child_validates_the_reference(tasks):
    t = next(t for t in tasks if t.level == 2)
    res = t.run_in_child(world_size=2, size="smoke", timeout=120)
    assert res.status == "passed", res.reason
    assert res.task_id == t.task_id and res.world_size == 2


def test_mgbench_eval_accepts_the_reference_of_each_row(folder, tasks, tmp_path):
    pytest.importorskip("mgbench.validation.eval")
    sols = tmp_path / "sols"
    for t in tasks[:2]:
        t.write(sols)
    proc = mgbench(
        "eval",
        "--dataset",
        str(folder),
        "--solutions-dir",
        str(sols),
        "--backend",
        "gloo",
        "--world-size",
        "2",
        "--no-timing",
        "--trials",
        "1",
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
