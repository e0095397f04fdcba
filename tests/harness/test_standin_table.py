"""The stand-in table (scrapers/harness/make/standins.py): which import gets which stand-in, in which order,
and that every stand-in names something the task-side runtime defines."""

from __future__ import annotations

import keyword

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.scrapers.harness.make.render import prepare
from mgbench.scrapers.harness.make.runtime_parts import on_demand, runtime_source
from mgbench.scrapers.harness.make.standins import STAND_INS, lookup, stand_in

# (module, imported name or None for `import module`, the entry expected, its expression): real imports
# of mined repositories, with the near misses that overlapping patterns must tell apart
CASES = [
    ("deepspeed.comm", None, "deepspeed.comm facade", "_mg_dist"),
    ("deepspeed", "comm", "deepspeed.comm facade", "_mg_dist"),
    ("nanotron", "distributed", "nanotron.distributed facade", "_mg_dist"),
    ("nanotron.distributed", None, "nanotron.distributed facade", "_mg_dist"),
    ("nanotron.distributed", "get_global_rank", "missing", "_MgMissing('nanotron.distributed.get_global_rank')"),
    ("megatron.core", "parallel_state", "parallel-state module by name", "_MgParallelState()"),
    ("megatron.core.parallel_state", None, "parallel-state module by name", "_MgParallelState()"),
    ("deepspeed.utils", "groups", "parallel-state module by name", "_MgParallelState()"),
    ("megatron.core.tensor_parallel_state", None, "parallel-state module imported whole", "_MgParallelState()"),
    (
        "megatron.core.parallel_state",
        "get_tensor_model_parallel_group",
        "parallel-state attribute",
        "_mg_ps_attr('get_tensor_model_parallel_group')",
    ),
    ("megatron.mpu", "get_data_parallel_rank", "parallel-state attribute", "_mg_ps_attr('get_data_parallel_rank')"),
    ("colossalai.legacy.core", "global_context", "ColossalAI global context", "_MgGlobalContext()"),
    ("colossalai.core", "gpc", "ColossalAI gpc", "_MgGlobalContext()"),
    ("repo.core", "gpc", "missing", "_MgMissing('repo.core.gpc')"),  # gpc is ColossalAI's only
    ("colossalai.legacy.context", "ParallelMode", "ParallelMode enum", "_MgEnum()"),
    (
        "megatron.core.process_groups_config",
        "ProcessGroupCollection",
        "Megatron ProcessGroupCollection",
        "_MgGroupCollection",
    ),
    ("triton", None, "triton", "_MgTriton('triton')"),
    ("triton", "jit", "triton", "_MgTriton('triton').jit"),
    ("triton.language", None, "triton", "_MgTriton('triton.language')"),
    ("triton_dist.language", "core", "triton", "_MgTriton('triton_dist.language').core"),
    ("triton_dist", None, "triton_dist imported whole", "_MgTriton('triton_dist')"),
    ("triton_dist", "jit", "triton_dist.jit", "_MgTriton('triton_dist').jit"),
    ("triton_dist", "kernels", "missing", "_MgMissing('triton_dist.kernels')"),  # only its jit stands in
    ("triton.runtime", "Autotuner", "missing", "_MgMissing('triton.runtime.Autotuner')"),
    ("pytest", None, "pytest", "_MgPytest()"),
    ("pytest", "mark", "missing", "_MgMissing('pytest.mark')"),
    ("tests.unit_tests.test_utilities", "Utils", "Megatron test Utils", "_MgTestUtils()"),
    ("unit.common", "DistributedTest", "DeepSpeed DistributedTest", "_MgDistributedTest"),
    ("deepspeed", None, "deepspeed imported whole", "_MgDeepSpeed()"),
    (
        "deepspeed.runtime",
        "compiler",
        "DeepSpeed compiler",
        "_mg_types.SimpleNamespace(compile=lambda *a, **k: _mg_passthrough)",
    ),
    ("deepspeed.runtime", "utils", "missing", "_MgMissing('deepspeed.runtime.utils')"),
    # `from .initialize import get_model_parallel_group` inside fairscale.nn.model_parallel (dots stripped)
    (
        "initialize",
        "get_model_parallel_group",
        "fairscale initialize attribute, relative",
        "_mg_ps_attr('get_model_parallel_group')",
    ),
    ("initialize", "setup", "missing", "_MgMissing('initialize.setup')"),
    ("deepspeed.utils", "instrument_w_nvtx", "pass-through decorator", "_mg_passthrough"),
    ("megatron.core.utils", "copy_signature", "pass-through decorator factory", "(lambda *a, **k: _mg_passthrough)"),
    ("physicsnemo.utils.profiling", "profile", "physicsnemo profile decorator", "_mg_passthrough"),
    ("repo.profiling", "profile", "missing", "_MgMissing('repo.profiling.profile')"),
    ("colossalai.legacy.registry", "LAYERS", "registry marks", "_MgMarks()"),
    ("colossalai.legacy.registry", "Registry", "missing", "_MgMissing('colossalai.legacy.registry.Registry')"),
    ("megatron.training", "get_args", "Megatron get_args", "(lambda *a, **k: args)"),
    ("repo.global_vars", "get_args", "global_vars get_args", "(lambda *a, **k: args)"),
    ("repo.cli", "get_args", "missing", "_MgMissing('repo.cli.get_args')"),
    (
        "megatron.core.tensor_parallel.random",
        "model_parallel_cuda_manual_seed",
        "model_parallel_cuda_manual_seed",
        "(lambda seed, *a, **k: _mg_torch.manual_seed(seed))",
    ),
    (
        "colossalai",
        "accelerator",
        "ColossalAI accelerator",
        "_mg_types.SimpleNamespace(get_accelerator=_MgAccelerator, get_current_device=lambda: "
        "_MgAccelerator().current_device())",
    ),
    ("colossalai.utils", "get_current_device", "get_current_device", "(lambda *a: _MgAccelerator().current_device())"),
    ("fairscale.nn.model_parallel", "initialize", "fairscale initialize", "_MgParallelState()"),
    ("fairscale.nn.model_parallel.initialize", None, "fairscale initialize imported whole", "_MgParallelState()"),
    (
        "fairscale.nn.model_parallel.initialize",
        "get_model_parallel_group",
        "fairscale initialize attribute",
        "_mg_ps_attr('get_model_parallel_group')",
    ),
    (
        "packaging.version",
        None,
        "packaging.version imported whole",
        "_mg_types.SimpleNamespace(Version=_MgVersion, parse=_MgVersion)",
    ),
    ("packaging", "version", "packaging's version", "_mg_types.SimpleNamespace(Version=_MgVersion, parse=_MgVersion)"),
    (
        "packaging",
        None,
        "packaging imported whole",
        "_mg_types.SimpleNamespace(version=_mg_types.SimpleNamespace(Version=_MgVersion, parse=_MgVersion))",
    ),
    ("packaging.version", "Version", "packaging.version Version", "_MgVersion"),
    ("packaging.version", "parse", "packaging.version Version", "_MgVersion"),
    ("megatron.core.utils", "is_torch_min_version", "minimum torch version", "_mg_torch_min_version"),
    ("deepspeed.utils.torch", "required_torch_version", "required_torch_version", None),
    (
        "megatron.core.utils",
        "get_torch_version",
        "Megatron get_torch_version",
        "(lambda *a: _MgVersion(_mg_torch.__version__))",
    ),
    (
        "fairscale.utils",
        "torch_version",
        "fairscale torch_version",
        "(lambda *a: _MgVersion(_mg_torch.__version__).release)",
    ),
    ("deepspeed.accelerator", "get_accelerator", "get_accelerator", "_MgAccelerator"),
    ("repo.dist", "get_pg_size", "group size", "(lambda group=None: _mg_dist.get_world_size(group))"),
    ("repo.dist", "get_pg_rank", "group rank", "(lambda group=None: _mg_dist.get_rank(group))"),
    ("megatron.training.utils", "print_rank_0", "rank-0 printing and NVTX ranges", "_mg_noop"),
    ("megatron.core.utils", "logger", "module logger", "__import__('logging').getLogger('mgbench.mined')"),
    ("colossalai.logging", "get_dist_logger", "logger factory", "(lambda *a, **k: _MgLogger())"),
    ("megatron.core.utils", "divide", "missing", "_MgMissing('megatron.core.utils.divide')"),
    ("transformer_engine", None, "missing", "_MgMissing('transformer_engine')"),
]


@pytest.mark.parametrize("module,name,label,expr", CASES)
def test_import_gets_its_stand_in(module, name, label, expr):
    assert lookup(module, name).label == label
    got, works = stand_in(module, name)
    assert works is (label != "missing")
    if expr is not None:
        assert got == expr


def test_every_entry_is_reached_by_an_import_no_earlier_entry_takes():
    """An entry shadowed by the ones above it would be dead: the cases reach each of them."""
    assert {label for _, _, label, _ in CASES} == {s.label for s in STAND_INS}
    assert len({s.label for s in STAND_INS}) == len(STAND_INS)
    assert STAND_INS[-1].label == "missing" and not STAND_INS[-1].works
    assert all(s.works for s in STAND_INS[:-1])


def _runtime_namespace() -> dict:
    """The namespace of a task module carrying the runtime and the Triton stand-in (test code only)."""
    ns: dict = {}
    exec(compile(runtime_source() + "\n" + on_demand("triton"), "<runtime>", "exec", dont_inherit=True), ns)
    return ns


def test_every_stand_in_evaluates_in_the_task_runtime():
    """Each expression names classes and functions the runtime defines (a renamed runtime class fails here,
    not in a sandboxed run as a NameError read as the candidate's)."""
    ns = _runtime_namespace()
    for module, name, label, _ in CASES:
        expr, works = stand_in(module, name)
        value = eval(expr, ns)  # test-authored expressions of the table, not mined code
        assert value is not None, (module, name, label)
        if not works:
            assert type(value).__name__ == "_MgMissing"


def test_rewritten_imports_use_the_table():
    prep = prepare(
        "import deepspeed\nfrom megatron.core import parallel_state as ps\n"
        "from repo.util import helper\n\n\ndef f(x):\n    return x\n"
    )
    assert "deepspeed = _MgDeepSpeed()" in prep.body and "ps = _MgParallelState()" in prep.body
    assert prep.stubbed == ["deepspeed", "megatron.core.parallel_state"]
    assert prep.missing == ["repo.util.helper"] and "helper = _MgMissing('repo.util.helper')" in prep.body


IDENT = st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True).filter(lambda s: not keyword.iskeyword(s))


@settings(max_examples=300, deadline=None)
@given(st.lists(IDENT, min_size=1, max_size=4), st.one_of(st.none(), IDENT))
def test_any_import_gets_one_valid_expression(parts, name):
    """Whatever is imported, the result is a Python expression; a placeholder names what was imported."""
    module = ".".join(parts)
    expr, works = stand_in(module, name)
    compile(expr, "<stand-in>", "eval")
    full = f"{module}.{name}" if name else module
    assert works is lookup(module, name).works and (works or expr == f"_MgMissing({full!r})")
