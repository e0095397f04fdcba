"""Rendering a candidate into a task module (scrapers/harness/make/render.py, splice.py): the stand-in table,
rewritten imports, missing base classes, decorators, the tolerant prelude."""

from __future__ import annotations

import pytest

from mgbench.scrapers.harness.make.render import prepare, stand_in
from tests.harness.helpers import LOCAL, _load


def test_function_local_import_gets_the_parallel_state_stand_in():
    body = prepare(LOCAL).body
    assert "mpu = _MgParallelState()" in body and "from megatron" not in body


def test_torch_distributed_nn_used_as_an_attribute_is_imported():
    """`dist.nn.functional.all_gather(x)` works in a repository that imported `torch.distributed.nn` somewhere
    else; the extracted module gets the import (it failed with "no attribute 'nn'")."""
    from mgbench.scrapers.harness.make.render import prepare

    body = prepare(
        "import torch\nimport torch.distributed as dist\n\n\ndef f(x):\n    return dist.nn.functional.all_gather(x)\n"
    ).body
    assert body.startswith("import torch.distributed.nn")
    assert "torch.distributed.nn" not in prepare("import torch\n\n\ndef f(x):\n    return x.nn\n").body


def test_copy_signature_decorator_factory_passes_the_function_through():
    src = (
        "import torch\nfrom megatron.core.typed_torch import copy_signature\n\n\n"
        "def base(x):\n    return x\n\n\n@copy_signature(base)\ndef f(*a, **k):\n    return a[0] + 1\n"
    )
    assert _load(prepare(src).body)["f"](1) == 2


def test_tolerant_prelude_skips_failing_module_statements_only():
    from mgbench.scrapers.harness.make.splice import tolerant

    prelude = (
        "import os\nLIMIT = 4\n\n\ndef backend():\n    raise RuntimeError('no GPU here')\n\n\n"
        "BACKEND = backend()\n\n\ndef helper(x):\n    return x * LIMIT\n"
    )
    ns: dict = {}
    try:
        exec(compile(prelude, "<prelude>", "exec"), {})  # test-authored code only (not mined)
        raise AssertionError("the prelude should fail as written")
    except RuntimeError:
        pass
    guarded = tolerant(prelude + "FLAG = BACKEND\n")
    exec(compile(guarded, "<prelude>", "exec"), ns)  # a name left unbound does not fail the next one
    assert ns["helper"](2) == 8 and "BACKEND" not in ns and "try:\n    LIMIT" not in guarded
    assert tolerant("def broken(:\n") == "def broken(:\n"
    assert tolerant("LIMIT = 4\n\n\ndef f():\n    return g()\n") == "LIMIT = 4\n\n\ndef f():\n    return g()\n"
    doc = 'X = f("""a\nb""")\n'
    assert tolerant(doc) == doc  # indenting would change the string


@pytest.mark.parametrize(
    "module,name,expr",
    [
        ("colossalai.legacy.core", "global_context", "_MgGlobalContext()"),
        ("colossalai.legacy.context", "ParallelMode", "_MgEnum()"),
        ("megatron.core.process_groups_config", "ProcessGroupCollection", "_MgGroupCollection"),
        ("pytest", None, "_MgPytest()"),
        ("tests.unit_tests.test_utilities", "Utils", "_MgTestUtils()"),
        ("unit.common", "DistributedTest", "_MgDistributedTest"),
        ("deepspeed", None, "_MgDeepSpeed()"),
        ("deepspeed.utils", "instrument_w_nvtx", "_mg_passthrough"),
        ("colossalai.legacy.registry", "LAYERS", "_MgMarks()"),
        ("fairscale.nn.model_parallel", "initialize", "_MgParallelState()"),
    ],
)
def test_stand_in_table(module, name, expr):
    assert stand_in(module, name) == (expr, True)


def test_missing_base_class_becomes_an_empty_base():
    prep = prepare("from repo.optim import Wrapper\n\n\nclass Opt(Wrapper):\n    pass\n")
    assert prep.missing == ["repo.optim.Wrapper"]
    from mgbench.scrapers.harness.make.render import runtime_source

    ns: dict = {}
    exec(runtime_source() + "\n" + prep.body, ns)
    assert ns["Opt"].__mro__[1].__name__ == "_MgBase"
