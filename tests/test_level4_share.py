"""The harness-share attribution (scrapers/level4/share.py): time in the synthesized runtime's frames (a
clone it makes) is the harness's, time in the mined code (and in what a pass-through mode forwards for it)
is the task's, whichever file the ops themselves live in."""

from __future__ import annotations

import sys
import time

import torch

from mgbench.scrapers.level4.share import Attribution

TASK = """
import time
import torch

def _mg_copy(x):
    return [x.clone() for _ in range(20)]

# ---- mined code (imports rewritten: none stubbed; none unavailable) ----
def mined(x):
    time.sleep(0.3)
    return x @ x

# ---- harness (synthesized) ----
def solution(x):
    _mg_copy(x)
    return mined(x)
"""


def test_attribution_separates_harness_frames_from_the_mined_code(tmp_path):
    path = tmp_path / "task.py"
    path.write_text(TASK)
    ns: dict = {}
    exec(compile(TASK, str(path), "exec"), ns)
    x = torch.randn(64, 64)
    t0 = time.perf_counter()
    ns["_mg_copy"](x)
    copy_s = time.perf_counter() - t0
    hook = Attribution(str(path))
    sys.setprofile(hook)
    try:
        ns["solution"](x)
    finally:
        sys.setprofile(None)
    assert hook.time["task"] >= 0.3  # the sleep and the matmul of the mined code
    assert 0.2 * copy_s <= hook.time["harness"] < 0.3  # the clones (in a list comprehension of _mg_copy)
    assert set(hook.by_function) <= {"solution", "_mg_copy", "<listcomp>"} and "mined" not in hook.by_function
