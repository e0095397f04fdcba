"""Annotations that would evaluate a placeholder or a TYPE_CHECKING name are quoted
(scrapers/harness/make/annotations.py); names defined or bound with a fallback are left alone."""

from __future__ import annotations

import ast

import pytest
import torch

from mgbench.scrapers.harness.make.annotations import quote_annotations
from mgbench.scrapers.harness.make.render import prepare, runtime_source
from tests.harness.helpers import ANNOTATED, _load


def test_unquoted_placeholder_subscript_fails_at_load_and_quoting_fixes_it():
    prep = prepare(ANNOTATED)
    raw = ANNOTATED.replace(
        "from megatron.core.optimizer import MegatronOptimizer",
        "MegatronOptimizer = _MgMissing('megatron.core.optimizer.MegatronOptimizer')",
    ).replace("import transformer_engine as te", "te = _MgMissing('transformer_engine')")
    with pytest.raises(ImportError, match="mgbench-missing-import"):
        _load(raw)  # what happened before: `List[placeholder]` at definition
    ns = _load(prep.body)
    ann = ns["reduce_all"].__annotations__
    assert ann["opts"] == "List[MegatronOptimizer]" and ann["cfg"] == "te.Config"
    assert ann["return"] == "Dict[str, MegatronOptimizer]" and ann["x"] is torch.Tensor
    assert "other: MegatronOptimizer | None" in prep.body  # bare unions work unquoted: text unchanged
    assert "plain: MegatronOptimizer = None" in prep.body
    with pytest.raises(ImportError, match="mgbench-missing-import: megatron.core.optimizer.MegatronOptimizer"):
        ns["uses_optimizer"](1)  # using the placeholder still fails


def test_future_annotations_and_names_defined_in_the_module_are_left_alone():
    src = "from __future__ import annotations\nfrom typing import List\n\ndef f(x: List[Missing]):\n    return x\n"
    assert quote_annotations(src, ast.parse(src), {"Missing"}) == src.splitlines()
    # a class of the module shadows a function-local placeholder import of the same name: not quoted
    src = (
        "from typing import Dict\n\nclass Key:\n    pass\n\nclass Layout:\n    m: Dict[Key, int] = None\n\n"
        "def g():\n    from pkg.layout import Key\n    return Key\n"
    )
    assert "m: Dict[Key, int] = None" in prepare(src).body


@pytest.mark.parametrize("line", ["def f(x: List[Missing]) -> int:", "def f(x: 'List[Missing]') -> int:"])
def test_quoting_is_idempotent_and_keeps_line_count(line):
    src = f"from typing import List\n{line}\n    return 1\n"
    once = quote_annotations(src, ast.parse(src), {"Missing"})
    twice = quote_annotations("\n".join(once), ast.parse("\n".join(once)), {"Missing"})
    assert len(once) == len(src.splitlines()) and once == twice and "'List[Missing]'" in once[1]


def test_quoted_dataclass_fields_load_in_an_unregistered_module():
    from mgbench.validation.eval.guard import load_source

    src = (
        "import dataclasses\nfrom typing import Optional\nfrom transformer_engine import Recipe\n\n\n"
        "@dataclasses.dataclass\nclass Cfg:\n    recipe: Optional[Recipe] = None\n    n: int = 2\n"
    )
    body = runtime_source() + "\n" + prepare(src).body
    assert "recipe: 'Optional[Recipe]' = None" in body
    mod = load_source(body, "<task>", register=False)
    assert mod.Cfg().n == 2 and not any(k == mod.__name__ for k in __import__("sys").modules)


def test_a_name_with_a_fallback_binding_is_not_quoted():
    src = (
        "from typing import Optional\nHAVE_TE = False\nif HAVE_TE:\n    from transformer_engine import Fp8\n"
        "else:\n    Fp8 = None\n\n\ndef f(x: Optional[Fp8] = None):\n    return x\n"
    )
    assert "def f(x: Optional[Fp8] = None):" in prepare(src).body


def test_form_feed_lines_leave_annotations_unquoted():
    src = "from typing import List\n\x0c\ndef f(x: List[Missing]):\n    return x\n"
    assert quote_annotations(src, ast.parse(src), {"Missing"}) == src.splitlines()


TC_PRELUDE = """import torch
import torch.distributed as dist
from typing import TYPE_CHECKING, Optional
if TYPE_CHECKING:
    from transformer_engine.pytorch.quantized_tensor import QuantizedTensor


class _Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor: QuantizedTensor, scale: Optional[QuantizedTensor] = None) -> QuantizedTensor:
        return tensor.detach()


class QuantizedTensor(torch.Tensor):
    pass


def f(x, group=None):
    dist.all_reduce(x, group=group)
    return _Identity.apply(x)
"""


def test_type_checking_names_in_annotations_are_quoted():
    """Flattened files lose their `from __future__ import annotations`: an annotation naming a TYPE_CHECKING
    import evaluated before the class is defined raised NameError at load (TransformerEngine
    `_IdentityFunc`); such annotations are quoted, other text stays."""
    import pytest

    from mgbench.scrapers.harness.make.render import prepare
    from tests.harness.helpers import _load

    with pytest.raises(NameError, match="QuantizedTensor"):
        _load(TC_PRELUDE)
    prep = prepare(TC_PRELUDE)
    assert "tensor: 'QuantizedTensor', scale: 'Optional[QuantizedTensor]' = None) -> 'QuantizedTensor':" in prep.body
    assert "class QuantizedTensor(torch.Tensor):" in prep.body
    ns = _load(prep.body)
    assert ns["_Identity"].forward.__annotations__["tensor"] == "QuantizedTensor"
