"""The failure categories of a harness attempt (scrapers/harness/run/outcomes.py): which error text gets
which `category: detail`, which are final, and that the table's order decides overlapping texts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.scrapers.harness.run.outcomes import CATEGORIES, categorize, classify
from mgbench.scrapers.harness.run.sandbox import Attempt


def _error(type_: str, msg: str, in_candidate: bool = True) -> Attempt:
    """A failed run whose rank 0 raised `type_: msg` (rank 1 broke off the collective with it)."""
    peer = {
        "ok": False,
        "error": {"type": "RuntimeError", "msg": "Connection closed by peer", "line": "", "in_candidate": False},
    }
    return Attempt(
        "error",
        [{"ok": False, "error": {"type": type_, "msg": msg, "line": "x = f()", "in_candidate": in_candidate}}, peer],
    )


LONG = "shape mismatch " * 20
# (attempt, reason, final): real error texts of harness runs (and the near misses)
CASES = [
    (
        Attempt("violation", [], "open('/etc/passwd') outside the sandbox"),
        "sandbox_violation: open('/etc/passwd') outside the sandbox",
        True,
    ),
    (Attempt("timeout", [None, None], "timed out after 8s"), "timeout", True),
    (Attempt("crashed", [None], "rank 1 exited with -11"), "crashed: rank 1 exited with -11", True),
    (
        _error("ImportError", "mgbench-missing-import: apex.normalization.FusedLayerNorm"),
        "needs_import: apex.normalization.FusedLayerNorm",
        True,
    ),
    # the harness's marker comes before the wording: a missing CUDA extension is a missing import
    (_error("ImportError", "mgbench-missing-import: fused_cuda_kernels"), "needs_import: fused_cuda_kernels", True),
    (
        _error("RuntimeError", "mgbench-skipped-by-test: " + "requires 8 GPUs " * 10),
        "skipped_by_test: " + ("requires 8 GPUs " * 10)[:80],
        True,
    ),
    (_error("MemoryError", ""), "memory_limit", True),
    (
        _error(
            "RuntimeError",
            "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: "
            "you tried to allocate 4294967296 bytes",
        ),
        "memory_limit",
        True,
    ),
    (
        _error("RuntimeError", "ProcessGroupNCCL is only supported with GPUs, no GPUs found!"),
        "needs_gpu: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
        True,
    ),
    (
        _error("AssertionError", "Torch not compiled with CUDA enabled"),
        "needs_gpu: Torch not compiled with CUDA enabled",
        True,
    ),
    (
        _error("RuntimeError", "Only one module can be active at a time"),
        "needs_gpu: Only one module can be active at a time",
        True,
    ),
    # a class named after NCCL is not a GPU need: its message is about the candidate's own object
    (
        _error("AttributeError", "'NCCLAllGatherDispatcher' object has no attribute 'hidden_shape'"),
        "search_exhausted: AttributeError: 'NCCLAllGatherDispatcher' object has no attribute 'hidden_shape'",
        False,
    ),
    (
        _error("ModuleNotFoundError", "No module named 'expecttest'", in_candidate=False),
        "needs_import: expecttest",
        True,
    ),
    (
        _error("ModuleNotFoundError", "No module named 'transformer_engine.pytorch'"),
        "needs_import: transformer_engine.pytorch",
        True,
    ),
    (
        _error("NameError", "name 'HAVE_APEX' is not defined", in_candidate=False),
        "load_error: NameError: name 'HAVE_APEX' is not defined",
        True,
    ),
    # the same error raised in the candidate's own code: the spec may be what is wrong
    (
        _error("NameError", "name 'args' is not defined"),
        "search_exhausted: NameError: name 'args' is not defined",
        False,
    ),
    (
        _error("ImportError", "cannot import name 'x' from partially initialized module", in_candidate=False),
        "load_error: ImportError: cannot import name 'x' from partially initialized module",
        True,
    ),
    (_error("RuntimeError", LONG), "search_exhausted: " + f"RuntimeError: {LONG}"[:120], False),
]


@pytest.mark.parametrize("at,reason,final", CASES)
def test_failed_attempt_gets_its_category(at, reason, final):
    assert categorize(at) == (reason, final)


def test_every_category_is_reached_by_a_real_error_text():
    """An entry shadowed by the ones above it would be dead: the cases reach each of them."""
    reached = {id(classify(at)[0]) for at, _, _ in CASES}
    assert reached == {id(c) for c in CATEGORIES}


def test_only_the_catch_all_lets_the_search_go_on():
    assert [c.name for c in CATEGORIES if not c.final] == ["search_exhausted"] == [CATEGORIES[-1].name]


def test_the_sandbox_verdict_comes_before_the_rank_error():
    """A run that timed out keeps `timeout` even when a rank reported a CUDA error before it hung."""
    at = _error("RuntimeError", "CUDA error: no kernel image")
    assert categorize(Attempt("timeout", at.replies, "timed out after 8s")) == ("timeout", True)


TYPES = st.sampled_from(
    [
        "RuntimeError",
        "TypeError",
        "ValueError",
        "AttributeError",
        "NameError",
        "ImportError",
        "ModuleNotFoundError",
        "MemoryError",
        "KeyError",
    ]
)


@settings(max_examples=300, deadline=None)
@given(TYPES, st.text(max_size=200), st.booleans())
def test_any_error_gets_one_named_category(type_, msg, in_candidate):
    reason, final = categorize(_error(type_, msg, in_candidate))
    name = reason.split(": ", 1)[0]
    assert name in {c.name for c in CATEGORIES} and final is (name != "search_exhausted")
    assert len(reason) <= len("search_exhausted: ") + 120
