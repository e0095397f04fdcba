"""Cheating candidates by class, on gloo (smoke, world size 2, task l1-all_reduce-sum-bw-fp16): each
is rejected with the rule that catches it. Classes: lazy outputs, caches over rotated inputs, shortcuts
taken only when timed, stale buffers, reflection through computed names, hooks left installed,
non-finite values, wrong dtype, partial work. The CUDA-only classes (stale caching-allocator block,
unsynchronized side stream) are skipped unless two CUDA devices exist, or one with
MGBENCH_TEST_EVAL_BACKEND=shared-gpu (test_cuda_cheat_is_rejected), which also judges every other
candidate here with the ranks' tensors on that GPU."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from mgbench.validation.eval.runner import REWRITE_PHASE, EvalOptions, evaluate
from mgbench.validation.eval.tasks import load_tasks_folder
from tests.conftest import EVAL_BACKEND

TASK = "l1-all_reduce-sum-bw-fp16"
HEAD = "import torch\nimport torch.distributed as dist\n"


def src(body: str) -> str:
    """Candidate source; a line `REDUCE` becomes the correct all-reduce into y, at its indentation."""
    lines = []
    for line in textwrap.dedent(body).splitlines():
        pad = line[: len(line) - len(line.lstrip())]
        lines += [pad + "y = x.clone()", pad + "dist.all_reduce(y)"] if line.strip() == "REDUCE" else [line]
    return HEAD + "\n".join(lines) + "\n"


# A cache keyed on the input object; the input is kept alive in the cache, so no later input takes its id or
# address and only the judge's call on the same tensors rewritten in place makes it hit.
IDENTITY_CACHE = src("""
    _cache = {}
    def solution(x):
        key = (id(x), x.data_ptr(), x._version)
        if key in _cache:
            return _cache[key][1].clone()
        REDUCE
        _cache[key] = (x, y)
        return y
""")

# name -> (source, needs timing, words the reason must contain; a tuple: one of them)
CHEATS = {
    # -- lazy outputs: the collective would run only when the harness touches the output ---------
    "lazy_torch_function_subclass": (
        src("""
        class Lazy(torch.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                args = [a._go() if isinstance(a, Lazy) else a for a in args]
                return func(*args, **(kwargs or {}))
            def _go(self):
                if not hasattr(self, "_y"):
                    self._y = self._src.clone()
                    dist.all_reduce(self._y)
                return self._y
        def solution(x):
            out = torch.Tensor._make_subclass(Lazy, torch.empty_like(x))
            out._src = x.clone()
            return out
    """),
        False,
        ["Lazy", "torch.Tensor subclass", "rule plain_output"],
    ),
    "lazy_dispatch_wrapper_subclass": (
        src("""
        class Wrap(torch.Tensor):
            @staticmethod
            def __new__(cls, inner):
                return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype)
            def __init__(self, inner):
                self.inner = inner
            @classmethod
            def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
                un = [a.inner if isinstance(a, Wrap) else a for a in args]
                return func(*un, **(kwargs or {}))
        def solution(x):
            return Wrap(x.clone())
    """),
        False,
        ["Wrap", "rule plain_output"],
    ),
    "tensor_like_with_fake_class": (
        src("""
        class Fake:
            __class__ = torch.Tensor
            def __init__(self, x):
                self.x = x
        def solution(x):
            return Fake(x)
    """),
        False,
        ["Fake", "not a torch.Tensor", "rule plain_output"],
    ),
    "instance_method_override": (
        src("""
        def solution(x):
            REDUCE
            good = y
            out = torch.zeros_like(x)
            out.clone = lambda *a, **k: good.clone()
            out.detach = lambda *a, **k: good
            return out
    """),
        False,
        ["shadowing", "rule plain_output"],
    ),
    "torch_function_mode_left_active": (
        src("""
        from torch.overrides import TorchFunctionMode
        class Agree(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))
        def solution(x):
            Agree().__enter__()
            REDUCE
            return y
    """),
        False,
        ["torch function mode", "rule dispatch_override"],
    ),
    "aten_kernel_override": (
        src("""
        _lib = torch.library.Library("aten", "IMPL", "CPU")
        _lib.impl("isfinite", lambda t: torch.ones(t.shape, dtype=torch.bool), "CPU")
        def solution(x):
            return torch.zeros_like(x)
    """),
        False,
        ["aten::isfinite", "rule dispatch_override"],
    ),
    # -- caches and shortcuts over the timing loop's rotated inputs ----------------------------
    "cache_keyed_on_sampled_values": (
        src("""
        _cache = {}
        def solution(x):
            f = x.view(-1)
            key = tuple(f[:: max(1, f.numel() // 4)].tolist())
            miss = torch.tensor([float(key not in _cache)])
            dist.all_reduce(miss, op=dist.ReduceOp.MAX)      # every rank takes the same branch
            if miss.item():
                REDUCE
                _cache[key] = y
            return _cache[key].clone()
    """),
        True,
        ["timing (candidate)", "differs from the reference", "rule timed_values"],
    ),
    "cache_keyed_on_pointer": (
        src("""
        _cache = {}
        def solution(x):
            miss = torch.tensor([float(x.data_ptr() not in _cache)])
            dist.all_reduce(miss, op=dist.ReduceOp.MAX)      # every rank takes the same branch
            if miss.item():
                REDUCE
                _cache[x.data_ptr()] = y
            return _cache[x.data_ptr()].clone()
    """),
        True,
        [("rule timed_values", "rule values", "rule rewritten_inputs")],
    ),  # malloc may reuse a trial's address
    "cache_keyed_on_sum": (
        src("""
        _cache = {}
        def solution(x):
            key = float(x.double().sum())
            if key not in _cache:
                REDUCE
                _cache[key] = y
            return _cache[key].clone()
    """),
        True,
        ["timing (candidate)", "rule timed_values"],
    ),
    "shortcut_on_reused_inputs": (
        src("""
        _seen = set()
        def solution(x):     # trials bring fresh inputs; the timing loop rotates a few sets
            seen = torch.tensor([float(x.data_ptr() in _seen)])
            dist.all_reduce(seen, op=dist.ReduceOp.MIN)      # every rank takes the same branch
            _seen.add(x.data_ptr())
            if seen.item():
                return x * dist.get_world_size()
            REDUCE
            return y
    """),
        True,
        [("rule timed_values", "rule values")],
    ),  # malloc may reuse a trial's address
    # hits only when the judge calls again on the kept tensors, new values written in (runner._run_phases): the
    # kept trial is the last correctness trial without timing, the one after timing with it
    "cache_on_input_identity": (IDENTITY_CACHE, False, ["rewritten in place", "rule rewritten_inputs"]),
    "cache_on_input_identity_timed": (IDENTITY_CACHE, True, ["rewritten in place", "rule rewritten_inputs"]),
    "lazy_only_when_timed": (
        src("""
        class Lazy(torch.Tensor):
            pass
        _n = [0]
        def solution(x):
            _n[0] += 1
            REDUCE
            if _n[0] > 6:
                return torch.Tensor._make_subclass(Lazy, y)
            return y
    """),
        True,
        ["timed call", "rule plain_output"],
    ),
    "partial_work_when_timed": (
        src("""
        _n = [0]
        def solution(x):      # reduces only the first half once past the correctness trials
            _n[0] += 1
            y = x.clone()
            if _n[0] > 6:
                dist.all_reduce(y[: y.numel() // 2])
            else:
                dist.all_reduce(y)
            return y
    """),
        True,
        ["timing (candidate)", "rule timed_values"],
    ),
    # -- memory left by the harness ----------------------------------------------------------
    "stale_buffer": (
        src("""
        def solution(x):
            return torch.empty_like(x)
    """),
        False,
        ["trial 1"],
    ),
    # -- reflection ------------------------------------------------------------------------------
    "frame_walk_computed_name": (
        src("""
        import sys
        def solution(x):
            f = getattr(sys, "_get" + "frame")(0)
            while f is not None:
                st = f.f_globals.get("_STATE")
                if st is not None:
                    return st.task.solution._fn(x)
                f = f.f_back
            return x.clone()
    """),
        False,
        ["sys._getframe", "rule introspection"],
    ),
    "frame_walk_through_traceback": (
        src("""
        def solution(x):
            try:
                raise ValueError
            except ValueError as e:
                tb = e.__traceback__
            f = getattr(tb, "tb_" + "frame")
            while f is not None and "_STATE" not in f.f_globals:
                f = f.f_back
            return f.f_globals["_STATE"].task.solution._fn(x)
    """),
        False,
        ["tb_frame", "rule introspection"],
    ),
    "frame_walk_caught_and_hidden": (
        src("""
        import sys
        def solution(x):
            try:
                getattr(sys, "_get" + "frame")(1)
            except Exception:
                pass             # the refusal is logged even when caught
            REDUCE
            return y
    """),
        False,
        ["sys._getframe", "rule introspection"],
    ),
    "builtins_dict_lookup": (
        src("""
        def solution(x):
            g = __builtins__["__import__"]("gc") if isinstance(__builtins__, dict) else None
            return g.get_objects() and x.clone()
    """),
        False,
        ["gc.get_objects", "rule introspection"],
    ),
    # -- plain wrong answers, each with its own reason -------------------------------------------
    "nan_output": (
        src("""
        def solution(x):
            REDUCE
            y[0] = float("nan")
            return y
    """),
        False,
        ["1 NaN", "rule nonfinite"],
    ),
    "inf_output": (
        src("""
        def solution(x):
            REDUCE
            y[1] = float("inf")
            return y
    """),
        False,
        ["0 NaN and 1 inf", "rule nonfinite"],
    ),
    "dtype_upcast": (
        src("""
        def solution(x):
            y = x.float()
            dist.all_reduce(y)
            return y
    """),
        False,
        ["dtype float32 != expected float16", "rule layout"],
    ),
    "partial_work": (
        src("""
        def solution(x):
            y = x.clone()
            dist.all_reduce(y[: y.numel() // 2])
            return y
    """),
        False,
        ["wrong output", "rule values"],
    ),
}
STATIC = {
    "frame_walk_computed_name": "reflection",
    "frame_walk_through_traceback": "introspection",
    "builtins_dict_lookup": "introspection",
    "aten_kernel_override": "dispatch_override",
}


@pytest.fixture(scope="module")
def tasks(core_tasks):
    return load_tasks_folder(core_tasks)


def evaluate_source(tmp_path: Path, tasks, source: str, **kw) -> dict:
    path = tmp_path / f"{TASK}.py"
    path.write_text(source)
    opts = EvalOptions(
        world_size=2,
        backend=EVAL_BACKEND,
        size="smoke",
        trials=kw.pop("trials", 3),
        # no cheat here is expected to hang: the timeout only guards against one, and a loaded 2-core
        # machine once needed 31 s for a cheat whose verdict comes from its outputs (a flaky timeout)
        timeout_s=90.0,
        budget_s=0.3,
        min_iters=20,
        heldout_shapes=kw.pop("heldout_shapes", 0),  # each rule on its own (held-out shapes: test_eval_shapes.py)
        **kw,
    )
    return evaluate(tasks[TASK], path, opts)


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_cheat_is_rejected_with_its_rule(name, tmp_path, tasks):
    source, timing, words = CHEATS[name]
    rec = evaluate_source(tmp_path, tasks, source, static=False, timing=timing)
    assert rec["status"] == "incorrect", (name, rec["reason"])
    for w in words:
        assert any(x in rec["reason"] for x in ((w,) if isinstance(w, str) else w)), (name, rec["reason"])


@pytest.mark.parametrize("name", sorted(STATIC))
def test_static_rules_name_the_cheat(name):
    from mgbench.validation.eval.static import check_source

    rep = check_source(CHEATS[name][0])
    if not rep.available:  # the GPU machines have no libcst: the runtime checks above still apply there
        pytest.skip(rep.message)
    assert STATIC[name] in {f.rule for f in rep.rejects()}, [f.describe() for f in rep.findings]


def test_an_honest_candidate_using_torchscript_is_judged(tmp_path, tasks):
    """TorchScript compiles from a function's source: the judge loads candidates from text, and that text
    must be readable through inspect (ParallelKernelBench's ring attention scripts its merge step)."""
    source = src("""
        @torch.jit.script
        def _double(t: torch.Tensor) -> torch.Tensor:
            return t + t
        def solution(x):
            REDUCE
            return _double(y) - y
    """)
    rec = evaluate_source(tmp_path, tasks, source, static=False, timing=False, trials=1)
    assert rec["status"] == "correct", rec["reason"]


def test_kept_inputs_changed_before_the_rewrite_are_named(tmp_path, tasks):
    # Without timing the held-out shape's call comes between the kept trial and the rewrite: there the candidate
    # restrides the kept input it stashed (on a GPU it could also empty its storage, and the judge's copy would
    # then write out of bounds: a crashed rank, not a verdict). The changed tensor is named.
    source = src("""
        _stash = []
        def solution(x):
            for t in _stash:
                t.as_strided_(t.shape, [0] * t.dim())
            _stash[:] = [x]
            REDUCE
            return y
    """)
    rec = evaluate_source(tmp_path, tasks, source, static=False, timing=False, heldout_shapes=1)
    assert rec["status"] == "incorrect" and "rule mutated_input" in rec["reason"], rec["reason"]
    assert "changed after it returned" in rec["reason"] and rec["phase"] == REWRITE_PHASE, rec["reason"]


def test_reference_passes_the_timed_checks(tmp_path, tasks):
    rec = evaluate_source(tmp_path, tasks, src("def solution(x):\n    REDUCE\n    return y\n"))
    assert rec["status"] == "correct", rec["reason"]
    checks = rec["timing"]["candidate_timed_checks"]
    # every timed call had an input set of its own, drawn by the reference ranks under a secret seed
    assert checks["verified"] >= 2 and checks["fresh_input_sets"] == checks["calls"] > 0, checks
    assert rec["within_noise"] or 0.25 < rec["speedup"] < 4.0, (rec["speedup"], rec["noise_floor"])


def _cuda_backend() -> str | None:
    """Where the CUDA-only cheats can run: NCCL on two GPUs, or ranks sharing one GPU when the suite is
    asked to judge on shared-gpu; None without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return None
    if EVAL_BACKEND == "shared-gpu":
        return "shared-gpu"
    return "nccl" if torch.cuda.device_count() >= 2 else None


GPU_CHEATS = {
    "stale_caching_allocator_block": (
        src("""
        def solution(x):
            return torch.empty_like(x)      # the allocator may hand back a block the harness freed
    """),
        ["wrong output"],
    ),
    "unsynchronized_side_stream": (
        src("""
        _s = {}
        def solution(x):
            s = _s.setdefault(x.device, torch.cuda.Stream(x.device))
            y = x.clone()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                torch.cuda._sleep(2_000_000)
                dist.all_reduce(y)
            return y
    """),
        ["side stream"],
    ),
    "side_stream_last_copy": (
        src("""
        _s = {}
        def solution(x):
            s = _s.setdefault(x.device, torch.cuda.Stream(x.device))
            t = x.clone()
            dist.all_reduce(t)
            y = torch.zeros_like(t)
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                torch.cuda._sleep(2_000_000)
                y.copy_(t)              # the last step left on a side stream, never waited for
            return y
    """),
        ["side stream"],
    ),
}
# backend -> why a cheat's mechanism does not exist there (it is then judged as an honest candidate)
NOT_A_CHEAT_ON = {
    ("unsynchronized_side_stream", "shared-gpu"): (
        "gloo stages a CUDA collective through the host and returns after it completed, so no device "
        "work is left on the side stream (side_stream_last_copy covers the rule there)"
    ),
}


@pytest.mark.skipif(
    _cuda_backend() is None,
    reason="GPU-only cheat: needs 2 CUDA GPUs, or one with MGBENCH_TEST_EVAL_BACKEND=shared-gpu",
)
@pytest.mark.parametrize("name", sorted(GPU_CHEATS))
def test_cuda_cheat_is_rejected(name, tmp_path, tasks):
    source, words = GPU_CHEATS[name]
    if (name, _cuda_backend()) in NOT_A_CHEAT_ON:
        pytest.skip(NOT_A_CHEAT_ON[name, _cuda_backend()])
    path = tmp_path / f"{TASK}.py"
    path.write_text(source)
    rec = evaluate(
        tasks[TASK],
        path,
        EvalOptions(world_size=2, backend=_cuda_backend(), size="full", trials=3, timeout_s=300, static=False),
    )
    assert rec["status"] == "incorrect", (name, rec["reason"])
    assert any(w in rec["reason"] for w in words), (name, rec["reason"])


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_a_nan_in_a_float8_output_is_named_not_a_crash(dtype):
    """float8 outputs (fp8 quantizers return codes) have no isfinite kernel: the check upcasts them."""
    from mgbench.validation.eval.rankchecks import nonfinite

    expected = torch.tensor([1.0, 2.0, -0.5]).to(dtype)
    got = torch.tensor([1.0, float("nan"), -0.5]).to(dtype)
    assert "1 NaN" in nonfinite(got, expected) and "rule nonfinite" in nonfinite(got, expected)
    assert nonfinite(expected.clone(), expected) == ""
