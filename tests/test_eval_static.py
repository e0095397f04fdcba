"""The libcst static checker: each rule fires on a planted pattern and stays quiet on clean code."""

from __future__ import annotations

import pytest

from mgbench.validation.eval.static import check_source

CLEAN = """
import os
import torch
import torch.distributed as dist
from torch.utils.cpp_extension import load_inline

torch.backends.cuda.matmul.allow_tf32 = False
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
try:
    import triton
except ImportError:
    triton = None
_state = {}

def _init(x):
    if "w" not in _state:
        dist.barrier()
        _state["w"] = dist.get_world_size()
    return _state["w"]

def solution(x, w):
    _init(x)
    s = torch.cuda.Stream() if x.is_cuda else None
    try:
        y = x @ w
    except RuntimeError:
        raise
    return y
"""

PLANTED = {
    "harness_import": "from mgbench.validation.compare import compare\n",
    "threads": "import threading\n",
    "dynamic_code": "def solution(x):\n    return eval('x')\n",
    "introspection": "import sys\ndef solution(x):\n    return sys._getframe(1).f_globals\n",
    "monkeypatch": "import torch\ntorch.cuda.Event.elapsed_time = lambda s, e: 0.0\n",
    "process_control": "import os\ndef solution(x):\n    os._exit(0)\n",
    "try_fallback": "import torch\ndef solution(x):\n    try:\n        return fast(x)\n    except Exception:\n"
    "        return torch.matmul(x, x)\n",
    "reference_call": "def solution(x):\n    return oracle([x], 2)[0]\n",
}


def test_clean_solution_has_no_findings():
    rep = check_source(CLEAN, forbid_collectives=True)
    assert rep.available and rep.findings == [], [f.describe() for f in rep.findings]


@pytest.mark.parametrize("rule", sorted(PLANTED))
def test_rule_fires(rule):
    rep = check_source(PLANTED[rule])
    assert rule in {f.rule for f in rep.rejects()}, [f.describe() for f in rep.findings]
    assert all(f.line >= 1 for f in rep.findings)


def test_aliased_imports_are_resolved():
    rep = check_source("import time as t\nfrom torch import cuda as c\nt.perf_counter = None\nc.synchronize = None\n")
    assert {f.message for f in rep.rejects()} == {"replaces time.perf_counter", "replaces torch.cuda.synchronize"}


def test_forbid_collectives_only_on_the_hot_path_and_only_when_asked():
    src = (
        "import torch.distributed as dist\nfrom torch.distributed import all_gather_into_tensor as agt\n"
        "def setup(t):\n    dist.all_reduce(t)\n"
        "class Impl:\n    def run(self, x, out):\n        agt(out, x)\n        return out\n"
        "def solution(x, out):\n    return Impl().run(x, out)\n"
    )
    assert not check_source(src).findings
    hits = check_source(src, forbid_collectives=True).rejects()
    assert [f.rule for f in hits] == ["forbid_collectives"]
    assert "all_gather_into_tensor" in hits[0].message and hits[0].line == 7


def test_module_level_try_fallback_is_only_flagged_for_review():
    rep = check_source("import torch\ntry:\n    K = build()\nexcept Exception:\n    K = torch.compile(f)\n")
    assert [f.severity for f in rep.findings] == ["review"]


def test_syntax_error_is_reported():
    rep = check_source("def solution(x):\n    return (\n")
    assert rep.rejects() and rep.rejects()[0].rule == "syntax"


def test_missing_libcst_degrades_with_a_message(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_libcst(name, *a, **k):
        if name.startswith("libcst"):
            raise ImportError("no libcst")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_libcst)
    rep = check_source("def solution(x):\n    return x\n")
    assert not rep.available and "libcst is not installed" in rep.message and rep.findings == []
