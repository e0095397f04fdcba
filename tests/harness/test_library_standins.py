"""Task-side stand-ins for libraries (standin_triton.py, standin_numpy.py, standin_optim.py,
standin_backward.py), drawn only into the tasks that need them."""

from __future__ import annotations

import pytest
import torch

from mgbench.scrapers.harness.make.render import prepare
from mgbench.scrapers.harness.make.runtime_parts import part_text
from tests.harness.helpers import COLUMN_PARALLEL, OPT_FN, TRITON, _load, _t, entry_candidate


def test_triton_values_used_as_numbers_fail_and_other_tasks_do_not_carry_the_stand_in():
    prep = prepare(TRITON)
    ns = _load(prep.body, prep.standins)
    for use in (
        lambda t: int(t.cdiv(5, 2)),
        lambda t: 16 // t.cdiv(5, 2),
        lambda t: max(16, t.next_power_of_2(3)),
        lambda t: t.testing.perf_report(1)(lambda: 1)(),
    ):
        with pytest.raises(ImportError, match="mgbench-missing-import: triton"):
            use(ns["triton"])
    assert not prepare("import torch\n\ndef f(x):\n    return x\n").standins


def test_triton_import_guarded_by_try_keeps_the_module_fallback():
    src = (
        "import torch\ntry:\n    import triton\n    HAS_TRITON = True\nexcept ImportError:\n    HAS_TRITON "
        "= False\n\n\n"
        "def f(x):\n    return HAS_TRITON\n"
    )
    prep = prepare(src)
    assert not prep.standins and "triton" in prep.missing and _load(prep.body)["f"](1) is False


def test_fwd_bwd_returns_outputs_then_input_gradients():
    ns = _load(prepare(COLUMN_PARALLEL).body + "\n_MG_BACKWARD_OF = 'LocalOnly'\n" + part_text("standin_backward.py"))
    x = torch.arange(3.0)
    with torch.no_grad():  # a caller's no_grad does not silence the backward
        out, grad = ns["_mg_fwd_bwd"](x)
    assert torch.equal(out, x * 2) and torch.equal(grad, 4 * x) and x.grad is None  # d(|2x|^2/2)/dx = 4x


def test_numpy_stand_in_rounds_and_types_like_numpy():
    ns: dict = {}
    from mgbench.scrapers.harness.make.runtime_parts import runtime_source

    exec(compile(runtime_source() + "\n" + part_text("standin_numpy.py"), "<np>", "exec"), ns)
    np = ns["_MgNumpy"]()
    assert np.float16(7e4) == float("inf") and np.uint8(300) == 44 and np.float32(0.1) != 0.1
    assert {np.float16: 2, np.float32: 4}[np.float16] == 2 and not isinstance(1.0, np.ndarray)
    assert np.ceil(2.5) == 3.0 and isinstance(np.ceil(2.5), float) and np.prod([2, 3]) == 6
    try:
        np.sqrt(torch.ones(3))
        raise AssertionError("an array argument must need numpy")
    except ImportError as e:
        assert "mgbench-missing-import: numpy" in str(e)


def test_optimizer_stand_in_is_only_in_tasks_that_draw_optimizers():
    """Other tasks' text (and content hash) stays as it was."""
    from mgbench.scrapers.harness.make.render import prepare, task_source

    cand, text = entry_candidate(OPT_FN, "sync_and_step", params=["optimizer", "group"])
    base = {"entry": "sync_and_step", "kind": "function", "attrs": [], "n_attr": 8}
    plain = task_source(cand, prepare(text), {**base, "args": [_t("optimizer"), {"name": "group", "kind": "group"}]})
    opt = task_source(
        cand,
        prepare(text),
        {
            **base,
            "args": [
                {"name": "optimizer", "kind": "optimizer", "count": "ws", "shape": ["n", "n"], "dtype": "float32"}
            ],
        },
    )
    assert "_MgOptimState" not in plain and "class _MgOptimState" in opt
