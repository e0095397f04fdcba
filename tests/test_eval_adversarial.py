"""`mgbench eval` on gloo (smoke size, world size 2): adversarial candidates are rejected with a clear
reason; the reference itself and a ParallelKernelBench-style file pass; batch mode + `mgbench score`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from mgbench.validation.eval.runner import EvalOptions, evaluate
from mgbench.validation.eval.tasks import load_tasks_folder

TASK = "l1-all_reduce-sum-lat-fp32"
HEAD = "import torch\nimport torch.distributed as dist\n"
REFERENCE = HEAD + textwrap.dedent("""
    def solution(x):
        y = x.clone()
        dist.all_reduce(y)
        return y
""")

# name -> (source, expected status, words the reason must contain)
ADVERSARIAL = {
    "cached_output": (
        HEAD
        + textwrap.dedent("""
        _cache = []
        def solution(x):
            if not _cache:
                y = x.clone()
                dist.all_reduce(y)
                _cache.append(y)
            return _cache[0].clone()
    """),
        "incorrect",
        ["trial 2", "wrong output"],
    ),
    "zeros": (HEAD + "def solution(x):\n    return torch.zeros_like(x)\n", "incorrect", ["wrong output"]),
    "returns_input": (HEAD + "def solution(x):\n    return x\n", "incorrect", ["shares memory with input 0"]),
    "input_copy": (HEAD + "def solution(x):\n    return x.clone()\n", "incorrect", ["wrong output"]),
    "other_seed": (
        HEAD
        + textwrap.dedent("""
        def solution(x):   # the answer for seed 0 (the seed validation uses), whatever the inputs
            g = torch.Generator().manual_seed((0 * 1000003 + (1 + dist.get_rank()) * 7919 + 17) % (2**63 - 1))
            y = torch.randn(x.shape, generator=g).to(x.dtype)
            dist.all_reduce(y)
            return y
    """),
        "incorrect",
        ["wrong output"],
    ),
    "async_thread": (
        HEAD
        + textwrap.dedent("""
        import threading, time
        def solution(x):   # CPU analogue of an unsynchronized side stream: finishes after returning
            y = x.clone()
            dist.all_reduce(y)
            out = torch.zeros_like(y)
            def late():
                time.sleep(0.3)
                out.copy_(y)
            threading.Thread(target=late).start()
            return out
    """),
        "incorrect",
        ["wrong output", "thread"],
    ),
    "mutates_input": (
        HEAD + "def solution(x):\n    dist.all_reduce(x)\n    return x.clone()\n",
        "incorrect",
        ["input 0 was modified"],
    ),
    "reused_buffer": (
        HEAD
        + textwrap.dedent("""
        _buf = {}
        def solution(x):
            y = _buf.setdefault("y", torch.empty_like(x))
            y.copy_(x)
            dist.all_reduce(y)
            return y
    """),
        "incorrect",
        ["previous call"],
    ),
    "imports_harness": (
        HEAD
        + textwrap.dedent("""
        import sys
        def solution(x):
            task = [m for m in list(sys.modules.values()) if "oracle" in getattr(m, "__dict__", {})]
            if task:
                return task[0].solution(x)
            from mgbench.validation.contract import load_module   # reach the harness instead
            return x.clone()
    """),
        "error",
        ["blocked"],
    ),
    "calls_reference_via_gc": (
        HEAD
        + textwrap.dedent("""
        import gc
        def solution(x):
            ref = next(o for o in gc.get_objects() if type(o).__name__ == "RefWatch" and o._name == "solution")
            return ref(x)
    """),
        "incorrect",
        ["gc.get_objects", "rule introspection"],
    ),
    "patches_timer": (
        HEAD + "import time\ntime.perf_counter = lambda: 0.0\n" + REFERENCE[len(HEAD) :],
        "incorrect",
        ["replaced", "time.perf_counter"],
    ),
    "hangs": (HEAD + "import time\ndef solution(x):\n    time.sleep(3600)\n", "timeout", ["timed out"]),
    "raises": (
        HEAD + "def solution(x):\n    raise RuntimeError('no kernel for you')\n",
        "error",
        ["RuntimeError", "no kernel for you"],
    ),
    "exits_rank1": (
        HEAD + "import os\ndef solution(x):\n    if dist.get_rank() == 1:\n        os._exit(3)\n    return x.clone()\n",
        "error",
        ["died"],
    ),
    "sigkills_self": (
        HEAD + "import os, signal\ndef solution(x):\n    os.kill(os.getpid(), signal.SIGKILL)\n",
        "error",
        ["died"],
    ),
}


@pytest.fixture(scope="module")
def tasks(core_tasks):
    return load_tasks_folder(core_tasks)


def run(tmp_path: Path, tasks, source: str, name: str = f"{TASK}.py", task: str = TASK, **kw):
    path = tmp_path / name
    path.write_text(source)
    opts = EvalOptions(
        world_size=2,
        backend="gloo",
        size="smoke",
        trials=kw.pop("trials", 2),
        timeout_s=kw.pop("timeout_s", 20.0),
        budget_s=0.2,
        **kw,
    )
    return evaluate(tasks[task], path, opts)


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial_candidate_is_rejected_at_runtime(name, tmp_path, tasks):
    source, status, words = ADVERSARIAL[name]
    rec = run(tmp_path, tasks, source, static=False, timing=False, timeout_s=6.0 if name == "hangs" else 20.0)
    assert rec["status"] == status, (name, rec["reason"])
    assert not rec["correct"]
    for w in words:
        assert w in rec["reason"], (name, rec["reason"])


STATIC_RULES = {
    "async_thread": "threads",
    "imports_harness": "introspection",
    "calls_reference_via_gc": "introspection",
    "patches_timer": "monkeypatch",
    "exits_rank1": "process_control",
    "sigkills_self": "process_control",
}


@pytest.mark.parametrize("name", sorted(STATIC_RULES))
def test_static_checks_reject_before_running(name, tmp_path, tasks):
    rec = run(tmp_path, tasks, ADVERSARIAL[name][0])
    assert rec["status"] == "incorrect" and rec["phase"] == "static", rec["reason"]
    assert STATIC_RULES[name] in rec["reason"]


def test_reference_as_candidate_is_correct_and_timed_with_a_noise_floor(tmp_path, tasks):
    rec = run(tmp_path, tasks, REFERENCE, trials=3)
    assert rec["status"] == "correct", rec["reason"]
    assert rec["trials_passed"] == 3 and rec["max_error"] == 0.0
    # CPU timings on a loaded machine are not results (the same code measured 0.2x to 10x on 2 shared
    # cores), so no bound on the ratio holds here: the timing must exist and carry its noise floor,
    # and `mgbench score` keeps it out of fast_p (tests/test_eval_score.py). Speed is checked on GPUs
    # by benchmarks/.
    assert rec["speedup"] > 0 and rec["timing"]["candidate"]["iters"] > 0
    assert rec["noise_floor"] >= 1.01 and isinstance(rec["within_noise"], bool)


PKB_STYLE = '''"""A file written for ParallelKernelBench's convention: a module with solution(*args)."""
import os
import torch
import torch.distributed as dist


def _reduce_inplace(buf):
    dist.all_reduce(buf, op=dist.ReduceOp.SUM)
    return buf


def solution(*args):
    (x,) = args
    return _reduce_inplace(x.detach().clone())


if __name__ == "__main__":      # PKB files may carry their own launcher; it must not run here
    dist.init_process_group("gloo")
    print(solution(torch.ones(4)))
'''


def test_pkb_convention_file_evaluates_unchanged(tmp_path, tasks):
    rec = run(tmp_path, tasks, PKB_STYLE, timing=False)
    assert rec["status"] == "correct", rec["reason"]
    assert rec["static"]["available"] and not rec["static"]["findings"]


def test_batch_resume_and_score(tmp_path, tasks, core_tasks):
    from mgbench.cli import main

    sols = tmp_path / "sols"
    sols.mkdir()
    (sols / f"{TASK}@1.py").write_text(REFERENCE)
    (sols / f"{TASK}@2.py").write_text(ADVERSARIAL["zeros"][0])
    (sols / f"{TASK}@3.py").write_text(PKB_STYLE)
    other = "l1-all_reduce-max-lat-fp32"
    (sols / f"{other}@1.py").write_text(ADVERSARIAL["raises"][0])
    (sols / f"{other}@2.py").write_text(REFERENCE.replace("all_reduce(y)", "all_reduce(y, op=dist.ReduceOp.MAX)"))
    (sols / "not-a-task.py").write_text(REFERENCE)
    results = tmp_path / "results.jsonl"
    args = [
        "eval",
        "--tasks",
        str(core_tasks),
        "--solutions-dir",
        str(sols),
        "--results",
        str(results),
        "--trials",
        "2",
        "--budget",
        "0.2",
        "--backend",
        "gloo",
        "--world-size",
        "2",
    ]
    assert main(args) == 2  # one sample raised -> exit code 2 (error)
    recs = [json.loads(x) for x in results.read_text().splitlines()]
    assert len(recs) == 5
    by = {r["sample"]: r["status"] for r in recs}
    assert by[f"{TASK}@1.py"] == "correct" and by[f"{TASK}@2.py"] == "incorrect"
    assert by[f"{other}@1.py"] == "error" and by[f"{other}@2.py"] == "correct"
    assert main(args) == 2  # resumed: nothing left to run, the same answer
    assert len(results.read_text().splitlines()) == 5
    png = tmp_path / "solved.png"
    assert main(["score", str(results), "--plot", str(png), "--k", "1", "--k", "2"]) == 0
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"
    from mgbench.validation.eval.score import score

    summary, _ = score([str(results)], [1, 2])
    assert summary["all"]["tasks"] == 2 and summary["all"]["samples"] == 5
    assert summary["all"]["pass@1"] == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert summary["all"]["pass@2"] == pytest.approx((1 + 1) / 2)
    assert "level 1" in summary and "dim collective" in summary
