"""Task-side stand-ins for repository globals (scrapers/harness/make/runtime/repo_globals.py): parallel state,
the DeepSpeed accelerator, loggers, pytest.importorskip."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from mgbench.scrapers.harness.make.render import runtime_source


def test_parallel_state_setup_calls_are_noops():
    ns: dict = {}
    exec(runtime_source(), ns)
    ps = ns["_MgParallelState"]()
    assert ps.initialize_model_parallel(2, 1) is None and ps.destroy_model_parallel() is None
    with pytest.raises(ImportError, match="parallel_state.get_args"):
        ps.get_args()


@pytest.mark.parametrize(
    "backend,device,comm", [("gloo", "cpu", "gloo"), ("nccl", "cuda", "nccl"), ("cpu:gloo,cuda:nccl", "cuda", "nccl")]
)
def test_accelerator_standin_on_every_pool_kind(monkeypatch, backend, device, comm):
    """A pool that gives CPU tensors gloo is still a GPU pool: buffers must land on the GPU (a CPU receive
    buffer against a GPU send deadlocks a batched ring step)."""
    monkeypatch.setattr(dist, "get_backend", lambda *a: backend)
    ns: dict = {}
    exec(runtime_source(), ns)
    acc = ns["_MgAccelerator"]()
    assert acc.get_current_device().type == device and acc.communication_backend == comm
    assert acc.communication_backend_name() == comm


def _runtime(monkeypatch, backend: str) -> dict:
    monkeypatch.setattr(dist, "get_backend", lambda *a: backend)
    ns: dict = {}
    exec(runtime_source(), ns)
    return ns


def test_accelerator_interface_on_cpu(monkeypatch):
    """The members DeepSpeed tests call: seeding, dtype factories, device count/placement; anything else
    stays a missing import (the candidate is rejected with the member's name, not run on a guess)."""
    acc = _runtime(monkeypatch, "gloo")["_MgAccelerator"]()
    acc.manual_seed(3)
    a = torch.randn(4)
    acc.manual_seed_all(3)
    assert torch.equal(a, torch.randn(4))
    t = acc.FloatTensor([1, 2])
    assert t.dtype == torch.float and t.tolist() == [1.0, 2.0] and t.device.type == "cpu"
    assert acc.ByteTensor(3).shape == (3,) and acc.ByteTensor(3).dtype == torch.uint8
    assert acc.device_count() == 1 and acc.device() == torch.device("cpu") and not acc.support_set_device
    assert torch.bfloat16 in acc.supported_dtypes() and acc.on_accelerator(t)
    with pytest.raises(ImportError, match="mgbench-missing-import: accelerator.create_graph"):
        acc.create_graph()


def test_accelerator_on_gpu_pool_places_on_cuda(monkeypatch):
    acc = _runtime(monkeypatch, "cpu:gloo,cuda:nccl")["_MgAccelerator"]()
    assert acc.support_set_device and acc.device_name() == "cuda"


def test_repository_logger_factory_logs_nothing():
    """ColossalAI `logger = get_dist_logger(); logger.info(msg, ranks=[0])`: the factory stood in by a logger
    whose methods accept anything (it returned None, and `.info` failed the candidate)."""
    from mgbench.scrapers.harness.make.render import stand_in

    expr, works = stand_in("colossalai.logging", "get_dist_logger")
    ns: dict = {}
    exec(runtime_source(), ns)
    logger = eval(expr, ns)()
    assert works and logger.info("x", ranks=[0]) is None and logger.warning("y") is None


def test_importorskip_returns_the_submodule_or_skips():
    """`fsdp = pytest.importorskip("torch.distributed.fsdp")` is the submodule (not `torch`); a torch module
    that does not exist skips the test like pytest; other packages stay missing imports."""
    ns: dict = {}
    exec(runtime_source(), ns)
    pt = ns["_MgPytest"]()
    assert pt.importorskip("torch.distributed.fsdp").__name__ == "torch.distributed.fsdp"
    with pytest.raises(RuntimeError, match="mgbench-skipped-by-test: could not import 'torch.no_such_mod'"):
        pt.importorskip("torch.no_such_mod")
    with pytest.raises(ImportError, match="mgbench-missing-import: numpy"):
        pt.importorskip("numpy").zeros(3)


def test_accelerator_memory_statistics_rng_and_events_on_a_cpu_rank(one_rank):
    """DeepSpeed's `see_memory_usage` and timers ask `get_accelerator()` for memory statistics, RNG state and
    events: on a CPU rank they are zeros, the CPU generator's state and a no-op event."""
    import torch

    from mgbench.scrapers.harness.make.render import runtime_source

    ns: dict = {}
    exec(runtime_source(), ns)
    acc = ns["_MgAccelerator"]()
    assert acc.memory_reserved() == 0 and acc.max_memory_allocated() == 0 and acc.memory_stats() == {}
    assert acc.reset_peak_memory_stats() is None
    state = acc.get_rng_state()
    a = torch.rand(3)
    acc.set_rng_state(state)
    assert torch.equal(a, torch.rand(3))
    ev = acc.Event(enable_timing=True)
    ev.record()
    assert ev.elapsed_time(acc.Event()) == 0.0
    with pytest.raises(ImportError, match="mgbench-missing-import: accelerator.no_such_method"):
        acc.no_such_method  # noqa: B018 - the attribute access itself must raise


def test_pipeline_stage_questions_of_the_parallel_state_stand_ins():
    """The pipeline is the world: rank 1 of 2 is the last stage, not the first."""
    import types

    from mgbench.scrapers.harness.make.render import runtime_source

    ns: dict = {}
    exec(runtime_source(), ns)
    ns["_mg_dist"] = types.SimpleNamespace(get_rank=lambda *a: 1, get_world_size=lambda *a: 2)
    mpu, gpc = ns["_MgParallelState"](), ns["_MgGlobalContext"]()
    assert not mpu.is_pipeline_first_stage(ignore_virtual=True) and mpu.is_pipeline_last_stage()
    assert not gpc.is_pipeline_first_stage() and gpc.is_pipeline_last_stage()
