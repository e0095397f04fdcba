"""The example solutions in examples/solutions/: named after real task ids, clean under the static
checks; evaluated for real only where two CUDA GPUs exist (examples/solutions/run_gpu.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mgbench.validation.eval.batch import task_of
from mgbench.validation.eval.static import check_source

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples" / "solutions").glob("l*.py"))


def test_there_are_examples():
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_names_a_task_and_passes_static_checks(path, core_tasks):
    ids = {
        line.split('"task_id": "')[1].split('"')[0] for line in (core_tasks / "manifest.jsonl").read_text().splitlines()
    }
    assert task_of(path) in ids
    rep = check_source(path.read_text(), forbid_collectives=True)
    assert rep.available and rep.findings == [], [f.describe() for f in rep.findings]


def _two_gpus() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.device_count() >= 2


@pytest.mark.skipif(not _two_gpus(), reason="the examples need 2 CUDA GPUs (symmetric memory, NVLink)")
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_is_correct_on_gpus(path, core_tasks):
    from mgbench.validation.eval.runner import EvalOptions, evaluate
    from mgbench.validation.eval.tasks import load_tasks_folder

    task = load_tasks_folder(core_tasks)[task_of(path)]
    rec = evaluate(
        task, path, EvalOptions(world_size=2, backend="nccl", size="full", trials=3, timeout_s=300, timing=False)
    )
    assert rec["status"] == "correct", rec["reason"]
