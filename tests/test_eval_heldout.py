"""Held-out check of the scorer, written after the checks and separately from test_eval_cheats.py:
cheats that the suite does not contain must be rejected, and honest candidates that use the
library features the guards sit close to (namedtuple, enum, logging, torch.library custom ops, a
persistent workspace, caught exceptions) must pass. gloo, smoke, world size 2."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mgbench.validation.eval.runner import EvalOptions, evaluate
from mgbench.validation.eval.tasks import load_tasks_folder

TASK = "l1-all_reduce-sum-lat-fp16"
HEAD = "import torch\nimport torch.distributed as dist\n"

CHEATS = {  # name -> (source, words one of which the reason must contain)
    "frames_from_traceback_walk_stack": (
        """
        import traceback
        def solution(x):        # walk_stack hands out frames, unlike extract_stack's strings
            for f, _ in traceback.walk_stack(None):
                if "_STATE" in f.f_globals:
                    return f.f_globals["_STATE"].task.solution._fn(x)
            return x.clone()
    """,
        ["rule introspection"],
    ),
    "lagged_answer": (
        """
        _st = {"n": 0, "prev": None}
        def solution(x):        # once past the trials, returns the previous call's answer
            _st["n"] += 1
            y = x.clone()
            dist.all_reduce(y)
            out = _st["prev"] if _st["n"] > 6 and _st["prev"] is not None else y
            _st["prev"] = y
            return out
    """,
        ["rule timed_values", "rule values"],
    ),
    "same_object_every_call": (
        """
        _keep = {}
        def solution(x):
            key = (tuple(x.shape), float(x.view(-1)[-1]))
            miss = torch.tensor([float(key not in _keep)])
            dist.all_reduce(miss, op=dist.ReduceOp.MAX)      # every rank takes the same branch
            if miss.item():
                y = x.clone()
                dist.all_reduce(y)
                _keep[key] = y
                return y.clone()
            return _keep[key]
    """,
        ["rule timed_values", "rule reused_buffer", "rule late_write", "rule values"],
    ),
    "class_swapped_after_creation": (
        """
        class Later(torch.Tensor):
            pass
        def solution(x):
            y = x.clone()
            dist.all_reduce(y)
            y.__class__ = Later
            return y
    """,
        ["rule plain_output"],
    ),
    "list_subclass_container": (
        """
        class Box(list):
            pass
        def solution(x):
            y = x.clone()
            dist.all_reduce(y)
            return Box([y])
    """,
        ["rule plain_output"],
    ),
    "inspect_stack": (
        """
        import inspect
        def solution(x):
            for info in inspect.stack():
                if "_STATE" in info.frame.f_globals:
                    return info.frame.f_globals["_STATE"].task.solution._fn(x)
            return x.clone()
    """,
        ["rule introspection"],
    ),
    "current_frames": (
        """
        import sys
        def solution(x):
            frames = sys._current_frames()
            return x.clone() if frames else x
    """,
        ["rule introspection"],
    ),
    "settrace_spy": (
        """
        import sys
        def spy(frame, event, arg):
            return None
        def solution(x):
            sys.settrace(spy)
            y = x.clone()
            dist.all_reduce(y)
            return y
    """,
        ["rule introspection"],
    ),
    "referrers_of_input": (
        """
        def solution(x):
            g = __import__("g" + "c")
            holders = g.get_referrers(x)
            y = x.clone()
            dist.all_reduce(y)
            return y
    """,
        ["rule introspection"],
    ),
    "nan_only_when_timed": (
        """
        _n = [0]
        def solution(x):
            _n[0] += 1
            y = x.clone()
            dist.all_reduce(y)
            if _n[0] > 6:
                y[0] = float("nan")
            return y
    """,
        ["rule timed_values"],
    ),
    "low_precision_when_timed": (
        """
        _n = [0]
        def solution(x):
            _n[0] += 1
            y = x.to(torch.bfloat16) if _n[0] > 6 else x.clone()
            dist.all_reduce(y)
            return y.to(x.dtype)
    """,
        ["rule timed_values"],
    ),
    "output_on_meta_device": (
        """
        def solution(x):
            return torch.empty(x.shape, dtype=x.dtype, device="meta")
    """,
        ["rule output_device"],
    ),
}

HONEST = {
    "namedtuple_enum_typing": """
        import collections, enum, typing
        Plan = collections.namedtuple("Plan", "op")
        class Mode(enum.Enum):
            SUM = 1
        T = typing.TypeVar("T")
        def solution(x):
            plan = Plan(dist.ReduceOp.SUM if Mode.SUM else None)
            y = x.clone()
            dist.all_reduce(y, op=plan.op)
            return y
    """,
    "logging_and_caught_exception": """
        import logging
        log = logging.getLogger("cand")
        def solution(x):
            log.warning("reducing %d elements", x.numel())
            try:
                int("not a number")
            except ValueError:
                pass
            y = x.clone()
            dist.all_reduce(y)
            return y
    """,
    "torch_library_custom_op": """
        @torch.library.custom_op("heldout::scale2", mutates_args=())
        def scale2(t: torch.Tensor) -> torch.Tensor:
            return t * 2
        def solution(x):
            y = scale2(x) * 0.5
            dist.all_reduce(y)
            return y
    """,
    "traceback_extract_stack": """
        import traceback
        def solution(x):
            where = traceback.extract_stack(limit=2)  # strings only, as torch 2.11's torch.library does
            y = x.clone()
            dist.all_reduce(y)
            return y if where else None
    """,
    "persistent_workspace": """
        _ws = {}
        def solution(x):
            buf = _ws.get(x.shape)
            if buf is None:
                buf = _ws[x.shape] = torch.empty_like(x)
            buf.copy_(x)
            dist.all_reduce(buf)
            return buf.clone()
    """,
}


@pytest.fixture(scope="module")
def tasks(core_tasks):
    return load_tasks_folder(core_tasks)


def _eval(tmp_path: Path, tasks, body: str) -> dict:
    path = tmp_path / f"{TASK}.py"
    path.write_text(HEAD + textwrap.dedent(body))
    return evaluate(
        tasks[TASK],
        path,
        EvalOptions(
            world_size=2,
            backend="gloo",
            size="smoke",
            trials=3,
            timeout_s=30.0,
            budget_s=0.3,
            min_iters=20,
            static=False,
        ),
    )


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_heldout_cheat_is_rejected(name, tmp_path, tasks):
    body, words = CHEATS[name]
    rec = _eval(tmp_path, tasks, body)
    assert rec["status"] == "incorrect", (name, rec["reason"])
    assert any(w in rec["reason"] for w in words), (name, rec["reason"])


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_candidate_passes(name, tmp_path, tasks):
    rec = _eval(tmp_path, tasks, HONEST[name])
    assert rec["status"] == "correct", (name, rec["reason"])
