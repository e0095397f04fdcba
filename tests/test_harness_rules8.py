"""Harness rules of session 8: annotations that would evaluate a placeholder are quoted, modules that define
Triton kernels load with a Triton stand-in (launching one still fails as a missing import), and typing-only
decorator factories pass the function through."""
from __future__ import annotations

import ast

import pytest
import torch

from scrapers.harness.annotations import quote_annotations
from scrapers.harness.inline import inline_candidate
from scrapers.harness.render import _below_marker, prepare, runtime_source
from scrapers.harness.search import Budget, synthesize
from tests.harness_cases import entry_candidate

ANNOTATED = '''from typing import Dict, List, Optional
import torch
import torch.distributed as dist
from megatron.core.optimizer import MegatronOptimizer
import transformer_engine as te


class Holder:
    opts: Optional[MegatronOptimizer] = None
    plain: MegatronOptimizer = None


def reduce_all(x: torch.Tensor, opts: List[MegatronOptimizer] = None, cfg: te.Config = None,
               other: MegatronOptimizer | None = None) -> Dict[str, MegatronOptimizer]:
    dist.all_reduce(x)
    return x


def uses_optimizer(x):
    return MegatronOptimizer(x)
'''


def _load(body: str, standins: str = "") -> dict:
    ns: dict = {}
    # test-authored code only (not mined); dont_inherit: this file's `from __future__ import annotations`
    exec(compile(runtime_source() + "\n" + standins + "\n" + body, "<task>", "exec", dont_inherit=True), ns)
    return ns


def test_unquoted_placeholder_subscript_fails_at_load_and_quoting_fixes_it():
    prep = prepare(ANNOTATED)
    raw = ANNOTATED.replace("from megatron.core.optimizer import MegatronOptimizer",
                            "MegatronOptimizer = _MgMissing('megatron.core.optimizer.MegatronOptimizer')") \
        .replace("import transformer_engine as te", "te = _MgMissing('transformer_engine')")
    with pytest.raises(ImportError, match="mgbench-missing-import"):
        _load(raw)                                  # what happened before: `List[placeholder]` at definition
    ns = _load(prep.body)
    ann = ns["reduce_all"].__annotations__
    assert ann["opts"] == "List[MegatronOptimizer]" and ann["cfg"] == "te.Config"
    assert ann["return"] == "Dict[str, MegatronOptimizer]" and ann["x"] is torch.Tensor
    assert "other: MegatronOptimizer | None" in prep.body         # bare unions work unquoted: text unchanged
    assert "plain: MegatronOptimizer = None" in prep.body
    with pytest.raises(ImportError, match="mgbench-missing-import: megatron.core.optimizer.MegatronOptimizer"):
        ns["uses_optimizer"](1)                     # using the placeholder still fails


def test_future_annotations_and_names_defined_in_the_module_are_left_alone():
    src = "from __future__ import annotations\nfrom typing import List\n\ndef f(x: List[Missing]):\n    return x\n"
    assert quote_annotations(src, ast.parse(src), {"Missing"}) == src.splitlines()
    # a class of the module shadows a function-local placeholder import of the same name: not quoted
    src = ('from typing import Dict\n\nclass Key:\n    pass\n\nclass Layout:\n    m: Dict[Key, int] = None\n\n'
           'def g():\n    from pkg.layout import Key\n    return Key\n')
    assert "m: Dict[Key, int] = None" in prepare(src).body


@pytest.mark.parametrize("line", ["def f(x: List[Missing]) -> int:", "def f(x: 'List[Missing]') -> int:"])
def test_quoting_is_idempotent_and_keeps_line_count(line):
    src = f"from typing import List\n{line}\n    return 1\n"
    once = quote_annotations(src, ast.parse(src), {"Missing"})
    twice = quote_annotations("\n".join(once), ast.parse("\n".join(once)), {"Missing"})
    assert len(once) == len(src.splitlines()) and once == twice and "'List[Missing]'" in once[1]


def _inline_double(root, ops: str):
    """Inline record of an entry calling `pkg.ops.double`, whose module text is `ops`, in a fake checkout."""
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "ops.py").write_text(ops)
    text = "import torch\nfrom pkg.ops import double\n\n\ndef entry(x):\n    return double(x)\n"
    cand, _ = entry_candidate(text, "entry", params=["x"])
    cand["provenance"]["path"] = "pkg/entry.py"
    return inline_candidate(cand, text, root)


def test_helper_annotated_with_a_third_party_type_is_inlined(tmp_path):
    rec = _inline_double(tmp_path, "from typing import Optional\nimport torch\nimport fancy_lib\n\n\n"
                         "def double(x: torch.Tensor, cfg: Optional[fancy_lib.Config] = None) -> torch.Tensor:\n"
                         "    return x * 2\n")
    assert rec.names == ["double"], rec.skipped       # before: "fancy_lib (unavailable) used at definition time"


TRITON = '''import torch
import torch.distributed as dist
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4)], key=["n"])
@triton.jit
def _scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)


def reference_all_reduce(x, group=None):
    y = x * 2
    dist.all_reduce(y, group=group)
    return y


def launched_all_reduce(x, group=None):
    _scale_kernel[(triton.cdiv(x.numel(), 128),)](x, x.numel())
    dist.all_reduce(x, group=group)
    return x
'''

FAST = Budget(seconds=40, attempts=8, attempt_timeout_s=6, mem_mb=512, ws4_attempts=0)


def test_module_with_triton_kernels_loads_and_its_torch_entry_is_accepted():
    prep = prepare(TRITON)
    assert "triton" in prep.stubbed and "class _MgTriton" in prep.standins and "_MgTriton" not in ANNOTATED
    cand, _ = entry_candidate(TRITON, "reference_all_reduce", params=["x", "group"])
    res = synthesize(cand, TRITON, FAST)
    assert res.accepted, res.reason


def test_launching_a_stubbed_triton_kernel_is_a_missing_import():
    cand, _ = entry_candidate(TRITON, "launched_all_reduce", params=["x", "group"])
    res = synthesize(cand, TRITON, FAST)
    assert not res.accepted and res.reason == "needs_import: triton"


def test_triton_values_used_as_numbers_fail_and_other_tasks_do_not_carry_the_stand_in():
    prep = prepare(TRITON)
    ns = _load(prep.body, prep.standins)
    for use in (lambda t: int(t.cdiv(5, 2)), lambda t: 16 // t.cdiv(5, 2), lambda t: max(16, t.next_power_of_2(3)),
                lambda t: t.testing.perf_report(1)(lambda: 1)()):
        with pytest.raises(ImportError, match="mgbench-missing-import: triton"):
            use(ns["triton"])
    assert not prepare("import torch\n\ndef f(x):\n    return x\n").standins


def test_triton_import_guarded_by_try_keeps_the_module_fallback():
    src = ("import torch\ntry:\n    import triton\n    HAS_TRITON = True\nexcept ImportError:\n    HAS_TRITON = False\n\n\n"
           "def f(x):\n    return HAS_TRITON\n")
    prep = prepare(src)
    assert not prep.standins and "triton" in prep.missing and _load(prep.body)["f"](1) is False


def test_copy_signature_decorator_factory_passes_the_function_through():
    src = ("import torch\nfrom megatron.core.typed_torch import copy_signature\n\n\n"
           "def base(x):\n    return x\n\n\n@copy_signature(base)\ndef f(*a, **k):\n    return a[0] + 1\n")
    assert _load(prepare(src).body)["f"](1) == 2


COLUMN_PARALLEL = '''import torch
import torch.distributed as dist


class CopyToTensorParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, weight):
        ctx.save_for_backward(input_, weight)
        return input_ @ weight.t()

    @staticmethod
    def backward(ctx, grad_output):
        input_, weight = ctx.saved_tensors
        grad_input = grad_output @ weight
        dist.all_reduce(grad_input)
        return grad_input, grad_output.t() @ input_


class LocalOnly(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        if x.numel() < 0:
            dist.all_reduce(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2
'''


def _autograd_candidate(entry: str) -> dict:
    cand, _ = entry_candidate(COLUMN_PARALLEL, entry, kind="autograd_function",
                              params=["ctx", "input_", "weight"] if entry.startswith("Copy") else ["ctx", "x"])
    return cand


def test_autograd_function_communicating_in_backward_runs_forward_and_backward():
    res = synthesize(_autograd_candidate("CopyToTensorParallel"), COLUMN_PARALLEL, FAST)
    assert res.accepted, res.reason
    assert res.spec["entry"] == "_mg_fwd_bwd" and res.spec["backward_of"] == "CopyToTensorParallel"
    from scrapers.harness.render import task_source
    text = task_source(_autograd_candidate("CopyToTensorParallel"), prepare(COLUMN_PARALLEL), res.spec)
    assert "_MG_BACKWARD_OF = 'CopyToTensorParallel'" in text and "def _mg_fwd_bwd" in text


def test_autograd_function_without_collectives_in_backward_stays_rejected():
    res = synthesize(_autograd_candidate("LocalOnly"), COLUMN_PARALLEL, FAST)
    assert not res.accepted and res.reason == "no_collective"


def test_fwd_bwd_returns_outputs_then_input_gradients():
    ns = _load(prepare(COLUMN_PARALLEL).body + "\n_MG_BACKWARD_OF = 'LocalOnly'\n" +
               _below_marker("standin_backward.py"))
    x = torch.arange(3.0)
    with torch.no_grad():                       # a caller's no_grad does not silence the backward
        out, grad = ns["_mg_fwd_bwd"](x)
    assert torch.equal(out, x * 2) and torch.equal(grad, 4 * x) and x.grad is None    # d(|2x|^2/2)/dx = 4x


LINEAR_BIAS = '''import torch
import torch.distributed as dist


class RowParallelLinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.t() + bias

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        grad_x = g @ weight
        dist.all_reduce(grad_x)
        return grad_x, g.t() @ x, g.sum(0)
'''


def test_backward_gradient_of_another_shape_reshapes_that_input():
    cand, _ = entry_candidate(LINEAR_BIAS, "RowParallelLinearFn", kind="autograd_function",
                              params=["ctx", "x", "weight", "bias"])
    res = synthesize(cand, LINEAR_BIAS, FAST)
    assert res.accepted, res.reason
    assert {a["name"]: a["shape"] for a in res.spec["args"]}["bias"] == ["n"] and res.spec["backward_of"]


def test_quoted_dataclass_fields_load_in_an_unregistered_module():
    from validation.eval.guard import load_source
    src = ("import dataclasses\nfrom typing import Optional\nfrom transformer_engine import Recipe\n\n\n"
           "@dataclasses.dataclass\nclass Cfg:\n    recipe: Optional[Recipe] = None\n    n: int = 2\n")
    body = runtime_source() + "\n" + prepare(src).body
    assert "recipe: 'Optional[Recipe]' = None" in body
    mod = load_source(body, "<task>", register=False)
    assert mod.Cfg().n == 2 and not any(k == mod.__name__ for k in __import__("sys").modules)


def test_a_name_with_a_fallback_binding_is_not_quoted():
    src = ("from typing import Optional\nHAVE_TE = False\nif HAVE_TE:\n    from transformer_engine import Fp8\n"
           "else:\n    Fp8 = None\n\n\ndef f(x: Optional[Fp8] = None):\n    return x\n")
    assert "def f(x: Optional[Fp8] = None):" in prepare(src).body


def test_multiline_annotation_with_a_third_party_type_still_blocks_inlining(tmp_path):
    rec = _inline_double(tmp_path, "from typing import Optional, Tuple\nimport fancy_lib\n\n\n"
                         "def double(x) -> Tuple[\n    Optional[fancy_lib.Config], int\n]:\n    return x * 2\n")
    assert rec.names == [] and "fancy_lib" in rec.skipped["pkg.ops.double"]


def test_form_feed_lines_leave_annotations_unquoted():
    src = "from typing import List\n\x0c\ndef f(x: List[Missing]):\n    return x\n"
    assert quote_annotations(src, ast.parse(src), {"Missing"}) == src.splitlines()
