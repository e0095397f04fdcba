"""Held-out shapes in `mgbench eval`: besides the published size, every evaluation checks correctness at a
shape drawn fresh from the task's shape space (validation/eval/shapes.py), never printed; a solution
specialized to the published shape is rejected under rule heldout_shape, an honest one passes, the drawn
shapes are recorded, and a maintainer can pin a private set. gloo, smoke, world size 2."""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from mgbench.validation.eval.commands import _pinned_shapes
from mgbench.validation.eval.runner import EvalOptions, evaluate, heldout_shapes_for
from mgbench.validation.eval.tasks import load_tasks_folder

TASK = "l1-all_reduce-sum-lat-fp16"
OPTS = EvalOptions(world_size=2, backend="gloo", size="smoke", trials=2, timeout_s=30.0, timing=False, static=False)

HONEST = """
import torch
import torch.distributed as dist
def solution(x):
    y = x.clone()
    dist.all_reduce(y)
    return y
"""
# a kernel specialized to the one shape the prompt shows: a workspace of the published element count
HARD_CODED = """
import torch
import torch.distributed as dist
_ws = {}
def solution(x):
    buf = _ws.setdefault("buf", torch.empty(PUBLISHED, dtype=x.dtype, device=x.device))
    buf.copy_(x.reshape(PUBLISHED))
    dist.all_reduce(buf)
    return buf.clone().view(x.shape)
"""


@pytest.fixture(scope="module")
def tasks(core_tasks):
    return load_tasks_folder(core_tasks)


def _eval(tmp_path: Path, task, source: str, opts: EvalOptions = OPTS) -> dict:
    path = tmp_path / f"{TASK}.py"
    path.write_text(textwrap.dedent(source))
    return evaluate(task, path, opts)


def test_a_solution_hard_coded_to_the_published_shape_is_rejected(tmp_path, tasks):
    task = tasks[TASK]
    n = task.published_sizes()["smoke"]["n"]
    rec = _eval(tmp_path, task, HARD_CODED.replace("PUBLISHED", str(n)))
    assert rec["status"] == "incorrect", rec["reason"]
    assert rec["reason"].endswith("(rule heldout_shape)") and "never printed" in rec["reason"], rec["reason"]
    assert rec["trials_passed"] == OPTS.trials  # right at the published shape
    assert rec["heldout_shapes"] and rec["heldout_shapes"][0]["n"] != n
    # without held-out shapes the same file passes: the check is what catches it
    assert (
        _eval(tmp_path, task, HARD_CODED.replace("PUBLISHED", str(n)), replace(OPTS, heldout_shapes=0))["status"]
        == "correct"
    )


def test_an_honest_solution_passes_and_the_drawn_shape_is_recorded(tmp_path, tasks):
    rec = _eval(tmp_path, tasks[TASK], HONEST)
    assert rec["status"] == "correct", rec["reason"]
    (shape,) = rec["heldout_shapes"]
    assert shape["n"] != tasks[TASK].published_sizes()["smoke"]["n"]


def test_shapes_are_drawn_fresh_per_evaluation_and_reproduced_by_its_seed(tasks):
    task = tasks[TASK]
    # at full size (the GPU judge's) the space is wide; smoke's one parameter has room for one other value
    opts = replace(OPTS, size="full", heldout_shapes=3)
    assert heldout_shapes_for(task, opts, 11) == heldout_shapes_for(task, opts, 11)
    drawn = {json.dumps(heldout_shapes_for(task, opts, seed)) for seed in range(20)}
    assert len(drawn) > 1


def test_a_pinned_private_shape_set_replaces_the_draw(tmp_path, tasks):
    task = tasks[TASK]
    n = task.published_sizes()["smoke"]["n"]
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps({TASK: [{"n": 3 * n}]}))
    opts = replace(OPTS, pinned_shapes=_pinned_shapes(str(path)))
    assert heldout_shapes_for(task, opts, 5) == [{"n": 3 * n}]
    rec = _eval(tmp_path, task, HARD_CODED.replace("PUBLISHED", str(n)), opts)
    assert rec["status"] == "incorrect" and rec["heldout_shapes"] == [{"n": 3 * n}], rec["reason"]


@pytest.mark.parametrize(
    "text, words",
    [("[1, 2]", "expected {task_id"), ("{not json", "not JSON"), ('{"t": [3]}', "expected {task_id")],
)
def test_a_bad_shapes_file_is_one_clear_error(tmp_path, text, words):
    path = tmp_path / "shapes.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=words) as e:
        _pinned_shapes(str(path))
    assert str(path) in str(e.value)


def test_a_shape_the_reference_cannot_run_is_skipped_with_a_note(tmp_path, tasks):
    task = tasks[TASK]
    opts = replace(OPTS, pinned_shapes={TASK: [{"n": -5}]})  # make_inputs cannot draw a negative size
    rec = _eval(tmp_path, task, HONEST, opts)
    assert rec["status"] == "correct", rec["reason"]
    assert rec["heldout_shapes"] == [] and any("held-out shape" in f and "skipped" in f for f in rec["flags"])
