"""End-to-end: a mined entry named `solution` (next to a mined `make_inputs`) is searched, accepted and
called by the task's own `solution` under its new name."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mgbench.scrapers.harness.inputs.search import synthesize
from mgbench.scrapers.harness.make.render import prepare, task_source
from tests.harness.helpers import FAST_8_NO_WS4, entry_candidate

pytestmark = pytest.mark.sandboxed  # runs candidates or tasks through child rank processes

MINED = """import torch
import torch.distributed as dist


def make_inputs(x):
    return x * 2


def solution(x):
    y = make_inputs(x).clone()
    dist.all_reduce(y)
    return y + 1
"""

# one gloo rank in a child process: the task's inputs and outputs, checked against the mined math
CHECK = """
import sys, torch, torch.distributed as dist, importlib.util
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=0, world_size=1)
spec = importlib.util.spec_from_file_location("task", sys.argv[1])
task = importlib.util.module_from_spec(spec)
spec.loader.exec_module(task)
(x,) = task.make_inputs(0, 1, seed=0, device="cpu", size="smoke")
print(torch.equal(task.solution(x), x * 2 + 1), task.solution is not task.mined_solution)
"""


def test_mined_solution_is_renamed_accepted_and_called_by_the_task(tmp_path):
    cand, text = entry_candidate(MINED, "solution", params=["x"])
    res = synthesize(cand, text, FAST_8_NO_WS4)
    assert res.accepted, res.reason
    assert res.spec["entry"] == "mined_solution"
    task = tmp_path / "task.py"
    task.write_text(task_source(cand, prepare(text), res.spec))
    out = subprocess.run(
        [sys.executable, "-c", CHECK, str(task), str(tmp_path / "store")], capture_output=True, text=True, timeout=60
    )
    assert out.stdout.split() == ["True", "True"], out.stderr[-2000:]
