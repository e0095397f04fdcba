"""The task-side runtime as listed parts (scrapers/harness/make/runtime_parts.py, scrapers/harness/make/runtime/):
the assembled text is the listed parts in order, every part file is listed, the text imports torch and
the standard library only, and a task module carries an on-demand part exactly when it needs it."""

from __future__ import annotations

import ast
import hashlib
import sys

import pytest

import mgbench.scrapers.harness.make.runtime as runtime_core
from mgbench.scrapers.harness.make import runtime_parts
from mgbench.scrapers.harness.make.render import prepare, task_source
from mgbench.scrapers.harness.make.runtime_parts import (
    EVERY_TASK,
    ON_DEMAND,
    RUNTIME_DIR,
    on_demand,
    part_text,
    runtime_source,
)

# sha256 of the runtime text every level-4 task module carries: a change changes the content hash of
# every level-4 task (GPU records are keyed on them), so it must be deliberate (re-validate, re-pin)
# last change: the accelerator stand-in follows a GPU rank over gloo (results/level4-pass9)
RUNTIME_SHA256 = "01d32901bf991ace538db3665cab65db81704798006b58ccc0b3b6a3bd4cd3a6"


def _below_docstring(file: str) -> str:
    """A part's text found independently of part_text: the source after its docstring's last line."""
    source = (RUNTIME_DIR / file).read_text()
    doc = ast.parse(source).body[0]
    assert isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
    assert isinstance(doc.value.value, str)
    return "".join(source.splitlines(keepends=True)[doc.end_lineno :]).strip("\n")


def test_runtime_text_is_the_every_task_parts_in_order():
    texts = [_below_docstring(f) for f in EVERY_TASK]
    assert runtime_source() == "\n\n\n".join(texts) + "\n"
    assert [part_text(f) for f in EVERY_TASK] == texts
    assert all(t for t in texts)


def test_every_part_file_is_listed_once_and_every_listed_file_exists():
    listed = list(EVERY_TASK) + [p.file for p in ON_DEMAND.values()]
    assert len(listed) == len(set(listed))
    on_disk = {p.name for p in RUNTIME_DIR.iterdir() if p.suffix == ".py"}
    assert on_disk == set(listed), f"orphan parts {on_disk - set(listed)}, missing {set(listed) - on_disk}"
    assert not [p.name for p in RUNTIME_DIR.iterdir() if p.is_file() and p.suffix != ".py"]


def test_on_demand_part_is_its_lead_then_its_text():
    for key, part in ON_DEMAND.items():
        fields = {"backward_of": "Fn"} if key == "backward" else {}
        assert on_demand(key, **fields) == part.lead.format(**fields) + _below_docstring(part.file)
    assert on_demand("backward", backward_of="Fn").splitlines()[1] == "_MG_BACKWARD_OF = 'Fn'"


def test_runtime_text_is_pinned():
    assert hashlib.sha256(runtime_source().encode()).hexdigest() == RUNTIME_SHA256


def _imported_roots(text: str) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add("." if node.level else (node.module or "").split(".")[0])
    return roots


def test_task_side_text_imports_torch_and_the_standard_library_only():
    """Nothing host-side lives in the runtime folder: no part imports the project or a third party."""
    for file in [*EVERY_TASK, *(p.file for p in ON_DEMAND.values())]:
        roots = _imported_roots(part_text(file))
        bad = {r for r in roots if r != "torch" and r not in sys.stdlib_module_names}
        assert not bad, (file, bad)


def test_every_part_runs_after_the_runtime():
    """The parts are text, not modules: each defines its names in a namespace that holds the runtime."""
    ns: dict = {}
    exec(compile(runtime_source(), "<runtime>", "exec", dont_inherit=True), ns)
    for key in ("optim", "drain", "triton", "numpy", "backward"):
        exec(compile(on_demand(key, backward_of="Fn"), f"<{key}>", "exec", dont_inherit=True), ns)
    assert {"_MgOptimState", "_mg_hosted_plain", "_MgTriton", "_MgNumpy", "_mg_fwd_bwd"} <= set(ns)


def test_core_part_is_the_module_host_code_imports():
    assert runtime_core.__file__ == str(RUNTIME_DIR / "__init__.py") and EVERY_TASK[0] == "__init__.py"
    assert runtime_core._mg_eval("ws * n // 2", 8, 4, 0) == 16


def test_a_part_without_its_docstring_is_refused_with_its_path(tmp_path, monkeypatch):
    (tmp_path / "broken.py").write_text("x = 1\n")
    monkeypatch.setattr(runtime_parts, "RUNTIME_DIR", tmp_path)
    with pytest.raises(ValueError, match=r"broken\.py: a runtime part starts with its docstring"):
        part_text("broken.py")


SOURCE = """import numpy as np
import torch
import torch.distributed as dist
import triton


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x


def f(opt, x):
    dist.all_reduce(x)
    return x * np.sqrt(4)
"""
CAND = {
    "id": "c0",
    "qualname": "f",
    "provenance": {
        "repo": "example/mined",
        "commit": "0" * 40,
        "path": "m.py",
        "line_start": 1,
        "line_end": 15,
        "license": "MIT",
        "url": "https://example.invalid/m.py",
    },
}
PLAIN = {"entry": "f", "args": [{"name": "x", "kind": "tensor"}], "attrs": []}
FULL = {
    "entry": "f",
    "args": [{"name": "opt", "kind": "optimizer"}, {"name": "x", "kind": "tensor"}],
    "attrs": [],
    "drain": True,
    "backward_of": "Fn",
}


@pytest.mark.parametrize("numpy", [False, True])
def test_task_module_carries_an_on_demand_part_exactly_when_it_needs_it(numpy):
    prep = prepare(SOURCE, numpy=numpy)
    plain, full = task_source(CAND, prep, PLAIN), task_source(CAND, prep, FULL)
    needed = {"triton": True, "numpy": numpy}
    for key in ON_DEMAND:
        text = on_demand(key, backward_of="Fn")
        assert full.count(text) == (1 if needed.get(key, True) else 0), key
        assert plain.count(text) == (1 if needed.get(key, False) else 0), key
    assert plain.count(runtime_source()) == full.count(runtime_source()) == 1
    # the order of a task module: runtime, optimizer inputs, drain, stand-ins, mined code, backward
    at = [full.index(runtime_source())] + [
        full.index(on_demand(k, backward_of="Fn")) for k in ON_DEMAND if needed.get(k, True)
    ]
    assert at == sorted(at)
    assert full.index("# ---- mined code") < full.index(on_demand("backward", backward_of="Fn"))
