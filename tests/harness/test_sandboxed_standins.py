"""End-to-end: candidates that need stand-ins for repository globals or libraries are accepted."""

from __future__ import annotations

import pytest

from mgbench.scrapers.harness.inputs.search import synthesize
from mgbench.scrapers.harness.make.render import prepare
from tests.harness.helpers import (
    ANNOTATED,
    CASES,
    FAST_8_NO_WS4,
    FAST_12,
    FAST_14_NO_WS4,
    STANDIN_CASES,
    TRITON,
    _function,
    candidate,
    entry_candidate,
)

pytestmark = pytest.mark.sandboxed  # runs candidates or tasks through child rank processes


SEEDED = (
    """import pytest
import torch
import torch.distributed as dist
from deepspeed.accelerator import get_accelerator


@pytest.mark.parametrize("scale", [pytest.param(2.0, id="two"), pytest.param(3.0, marks=pytest.mark.slow)])
def test_seeded_allreduce(x, scale=2.0):
    get_accelerator().manual_seed(1234)
    noise = torch.randn(x.shape)
    y = (x + noise).to(get_accelerator().device_name())
    dist.all_reduce(y)
    return y * scale
""",
    ["x"],
)


def test_seeded_test_with_params_is_accepted(monkeypatch):
    """A DeepSpeed-style test that seeds through the accelerator and is parametrized with pytest.param:
    accepted, and its output still depends on the inputs (the seeded noise alone would be insensitive)."""
    monkeypatch.setitem(CASES, "seeded", SEEDED)
    res = synthesize(*candidate("seeded"), FAST_12)
    assert res.accepted, (res.reason, res.last_error)


GLOBAL_ARGS = (
    """import torch
import torch.distributed as dist
from megatron.training import get_args


def loss_func(loss_mask, output_tensor):
    args = get_args()
    loss = torch.sum(output_tensor.float() * loss_mask.float()).view(1)
    if args.context_parallel_size > 1:
        dist.all_reduce(loss)
    dist.all_reduce(loss)
    return loss
""",
    ["loss_mask", "output_tensor"],
)


def test_megatron_get_args_is_a_synthesized_module_global(monkeypatch):
    """`get_args()` returns the module global `args`, built like any missing global (a namespace whose fields
    come from the AttributeErrors): Megatron's real one asserts 'args is not initialized'."""
    monkeypatch.setitem(CASES, "global_args", GLOBAL_ARGS)
    res = synthesize(*candidate("global_args"), FAST_12)
    assert res.accepted, (res.reason, res.last_error)
    (g,) = res.spec["globals"]
    assert g["name"] == "args" and g["kind"] == "namespace"
    assert [f["name"] for f in g["fields"]] == ["context_parallel_size"]


GLOBAL_MPU = """import torch
import torch.distributed as dist

g_mpu = None


def _gather(input_):
    group = g_mpu.get_model_parallel_group()
    out = [torch.empty_like(input_) for _ in range(dist.get_world_size(group=group))]
    dist.all_gather(out, input_, group=group)
    return torch.cat(out)
"""


def test_a_module_global_left_none_becomes_a_parallel_state():
    """DeepSpeed `g_mpu = None` set by an init function elsewhere: `g_mpu.get_model_parallel_group()` gets
    the parallel-state stand-in (every group the world), as a module global of the harness."""
    res = synthesize(*_function(GLOBAL_MPU, "_gather", ["input_"]), FAST_14_NO_WS4)
    assert res.accepted, (res.reason, res.last_error)
    assert res.spec["globals"] == [{"name": "g_mpu", "kind": "group", "value": "state"}]


def test_module_with_triton_kernels_loads_and_its_torch_entry_is_accepted():
    prep = prepare(TRITON)
    assert "triton" in prep.stubbed and "class _MgTriton" in prep.standins and "_MgTriton" not in ANNOTATED
    cand, _ = entry_candidate(TRITON, "reference_all_reduce", params=["x", "group"])
    res = synthesize(cand, TRITON, FAST_8_NO_WS4)
    assert res.accepted, res.reason


NUMPY = """import numpy as np
import torch
import torch.distributed as dist


def scaled_mean(x):
    np.random.seed(0)
    scale = np.sqrt(x.numel()) * np.prod([1, 2]) / np.float32(2)
    dist.all_reduce(x)
    return x / scale


def uses_arrays(x):
    dist.all_reduce(x)
    return torch.from_numpy(np.asarray(x.numpy()) * 2)
"""


def test_numpy_scalar_math_runs_on_the_stand_in_and_arrays_still_need_numpy():
    from mgbench.scrapers.harness.make.render import prepare

    assert "numpy" in prepare(NUMPY).missing and not prepare(NUMPY).standins  # only when asked for
    prep = prepare(NUMPY, numpy=True)
    assert "numpy" in prep.stubbed and "class _MgNumpy" in prep.standins and "np = _MgNumpy()" in prep.body
    guarded = prepare("try:\n    import numpy as np\nexcept ImportError:\n    np = None\n", numpy=True)
    assert "_MgNumpy" not in guarded.body  # the module's own fallback runs
    cand, _ = entry_candidate(NUMPY, "scaled_mean", params=["x"])
    assert synthesize(cand, NUMPY, FAST_8_NO_WS4).reason == "needs_import: numpy"
    res = synthesize({**cand, "numpy": True}, NUMPY, FAST_8_NO_WS4)
    assert res.accepted and res.spec["numpy"], res.reason
    cand, _ = entry_candidate(NUMPY, "uses_arrays", params=["x"])
    res = synthesize({**cand, "numpy": True}, NUMPY, FAST_8_NO_WS4)
    assert not res.accepted and res.reason == "needs_import: numpy.asarray"


@pytest.mark.parametrize("name", sorted(STANDIN_CASES))
def test_standin_cases_are_accepted(name):
    cand, text = candidate(name)
    res = synthesize(cand, text, FAST_12)
    assert res.accepted, (res.reason, res.last_error)
    assert all(fp["nonzero"] > 0 for fp in res.fingerprints["ws2"])
    kinds = {a["name"]: a for a in res.spec["args"]}
    if name == "config_obj":
        assert kinds["config"]["kind"] == "namespace"
        assert {f["name"] for f in kinds["config"]["fields"]} == {"average_in_collective", "gradient_scale"}
    if name == "dict_arg":
        assert kinds["batch"].get("dict") and [f["name"] for f in kinds["batch"]["fields"]] == ["loss"]
    if name == "main_grad":
        assert kinds["param"]["kind"] == "tensor" and kinds["param"]["fields"][0]["name"] == "main_grad"
    if name == "colossal_gpc":
        assert "colossalai.legacy.core.global_context" in res.stubbed
