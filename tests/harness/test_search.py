"""Search bookkeeping without running candidates (scrapers/harness/inputs/search.py): the resize memo and how an
attempt's error is categorized."""

from __future__ import annotations

from mgbench.scrapers.harness.inputs.search import SizeMemo
from tests.harness.helpers import _spec_json as _spec


def test_a_missing_package_is_a_missing_import_not_a_search_failure():
    from mgbench.scrapers.harness.inputs.search import categorize
    from mgbench.scrapers.harness.run.sandbox import Attempt

    err = {
        "type": "ModuleNotFoundError",
        "msg": "No module named 'expecttest'",
        "line": "import expecttest",
        "in_candidate": True,
    }
    assert categorize(Attempt("error", [{"ok": False, "error": err}])) == ("needs_import: expecttest", True)


def test_a_resize_that_changes_nothing_stops_further_resizes_of_that_argument():
    memo = SizeMemo()
    a = _spec(x={"kind": "tensor", "shape": ["n"]}, k={"kind": "int", "expr": "n"})
    b = _spec(x={"kind": "tensor", "shape": ["n*ws"]}, k={"kind": "int", "expr": "n"})
    memo.ran(a, "ValueError: boom @ line")
    assert not memo.futile(b)
    memo.ran(b, "ValueError: boom @ line")
    assert memo.futile(_spec(x={"kind": "tensor", "shape": ["ws"]}, k={"kind": "int", "expr": "n"}))
    # another argument's size, or a change of kind, is still worth a run
    assert not memo.futile(_spec(x={"kind": "tensor", "shape": ["n"]}, k={"kind": "int", "expr": "1"}))
    assert not memo.futile(_spec(x={"kind": "int", "expr": "n"}, k={"kind": "int", "expr": "n"}))
    # another number of dimensions is a different structure until two of those fail alike too
    c = _spec(x={"kind": "tensor", "shape": ["n", "n"]}, k={"kind": "int", "expr": "n"})
    assert not memo.futile(c)
    memo.ran(c, "ValueError: boom @ line")
    assert memo.futile(_spec(x={"kind": "tensor", "shape": ["n", "n", "n"]}, k={"kind": "int", "expr": "n"}))


def test_an_argument_named_on_a_failing_line_without_numbers_keeps_its_sizes_open():
    memo = SizeMemo()
    memo.ran(_spec(x={"kind": "tensor", "shape": ["n"]}), "AssertionError: ", "assert x.size(0) % 3 == 0")
    memo.ran(_spec(x={"kind": "tensor", "shape": ["n*ws"]}), "AssertionError: ", "assert x.size(0) % 3 == 0")
    assert not memo.futile(_spec(x={"kind": "tensor", "shape": ["ws"]}))


def test_a_different_outcome_keeps_resizing_open():
    memo = SizeMemo()
    memo.ran(_spec(x={"kind": "tensor", "shape": ["n"]}), "RuntimeError: size 8 @ l")
    memo.ran(_spec(x={"kind": "tensor", "shape": ["n*ws"]}), "RuntimeError: size 16 @ l")
    assert not memo.futile(_spec(x={"kind": "tensor", "shape": ["ws"]}))


def test_backend_module_dispatch_without_a_gpu_is_needs_gpu():
    """Triton-distributed's ModuleProxy asserts that exactly one of its CUDA/HIP backend modules is active:
    on CPU none is, a GPU need (final), not a search failure to mend; an unrelated assertion is not."""
    from mgbench.scrapers.harness.inputs.search import categorize
    from mgbench.scrapers.harness.run.sandbox import Attempt

    err = {"type": "AssertionError", "msg": "only one module can be active", "line": "", "in_candidate": True}
    assert categorize(Attempt("error", [{"ok": False, "error": err}])) == (
        "needs_gpu: only one module can be active",
        True,
    )
    other = {**err, "msg": "only one rank can be active"}
    assert categorize(Attempt("error", [{"ok": False, "error": other}]))[1] is False
