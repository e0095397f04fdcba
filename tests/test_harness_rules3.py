"""Harness rules of session 3 (scrapers/harness): script-style entries that start their own process group
and parse the command line; parallel-state set-up/tear-down calls. Small hand-written candidates only."""
from __future__ import annotations

import os
import sys

import pytest
import torch.distributed as dist

from scrapers.harness.render import runtime_source
from scrapers.harness.search import Budget, synthesize
from tests.harness_cases import CASES, candidate

FAST = Budget(seconds=40, attempts=12, attempt_timeout_s=6, mem_mb=512)

SCRIPT = ('''import argparse
import os
import torch
import torch.distributed as dist
from torch.distributed import destroy_process_group, init_process_group


def main(x):
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=2.0)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    init_process_group("gloo")
    y = x.clone() + int(os.environ["LOCAL_RANK"])
    dist.all_reduce(y)
    dist.destroy_process_group()
    destroy_process_group()
    return y * args.scale
''', ["x"])


def test_script_style_entry_is_hosted(monkeypatch):
    """init_process_group/destroy_process_group/argparse inside the entry: accepted, and the group survives
    the reruns of the acceptance checks (destroy was a no-op)."""
    monkeypatch.setitem(CASES, "script_main", SCRIPT)
    cand, text = candidate("script_main")
    res = synthesize(cand, text, FAST)
    assert res.accepted, (res.reason, res.last_error)


def test_hosting_is_scoped_to_the_call(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setattr(dist, "get_rank", lambda *a: 1)
    monkeypatch.setattr(dist, "get_world_size", lambda *a: 2)
    monkeypatch.setattr(dist, "get_backend", lambda *a: "gloo")
    ns: dict = {}
    exec(runtime_source(), ns)
    init, destroy, argv = dist.init_process_group, dist.destroy_process_group, sys.argv
    with ns["_mg_hosted"]("f"):
        assert sys.argv == ["f"] and dist.init_process_group is not init
        assert (os.environ["RANK"], os.environ["WORLD_SIZE"]) == ("1", "2")
        assert dist.destroy_process_group() is None          # tearing down the world: a no-op
    assert (dist.init_process_group, dist.destroy_process_group, sys.argv) == (init, destroy, argv)
    assert "RANK" not in os.environ
    with pytest.raises(KeyError):                           # restored even when the entry raises
        with ns["_mg_hosted"]("f"):
            raise KeyError("x")
    assert dist.init_process_group is init


def test_parallel_state_setup_calls_are_noops():
    ns: dict = {}
    exec(runtime_source(), ns)
    ps = ns["_MgParallelState"]()
    assert ps.initialize_model_parallel(2, 1) is None and ps.destroy_model_parallel() is None
    with pytest.raises(ImportError, match="parallel_state.get_args"):
        ps.get_args()


GPU_PLACED = ('''import torch
import torch.distributed as dist


def reduce_on_gpu(x):
    torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())
    y = x.cuda()
    buf = torch.zeros(y.shape, device="cuda", dtype=y.dtype)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        buf.copy_(y * 2)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.nvtx.range_push("ar")
    dist.all_reduce(buf)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    return buf.to(torch.cuda.current_device()) + torch.ones(1, device=torch.device("cuda", 0))
''', ["x"])

TRITON_LIKE = ('''import torch
import torch.distributed as dist


def needs_a_real_gpu(x):
    y = x.cuda()
    dist.all_reduce(y)
    return torch.cuda.get_device_properties(0).multi_processor_count * y
''', ["x"])


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="emulation is for CPU-only ranks")
def test_cuda_placement_is_emulated_on_cpu_ranks(monkeypatch):
    monkeypatch.setitem(CASES, "gpu_placed", GPU_PLACED)
    cand, text = candidate("gpu_placed")
    res = synthesize(cand, text, FAST)
    assert res.accepted, (res.reason, res.last_error)
    monkeypatch.setitem(CASES, "triton_like", TRITON_LIKE)
    cand, text = candidate("triton_like")
    res = synthesize(cand, text, FAST)                      # device queries beyond placement: still a GPU need
    assert not res.accepted and res.reason.startswith("needs_gpu"), res.reason


def test_cuda_emulation_is_scoped():
    import torch
    ns: dict = {}
    exec(runtime_source(), ns)
    before = (torch.cuda.set_device, torch.cuda.Stream, torch.cuda.nvtx.range_push)
    with ns["_mg_cpu_cuda"](2, True):
        assert torch.zeros(2, device="cuda").device.type == "cpu" and torch.cuda.device_count() == 2
        x = torch.ones(3)
        assert x.cuda() is x and x.to("cuda:1").device.type == "cpu" and x.to(torch.float64).dtype == torch.float64
        assert x.to(device=0).device.type == "cpu" and x.to(1, torch.float16).dtype == torch.float16
        lin = torch.nn.Linear(2, 2).to(1)                       # Module.to(rank), the DDP idiom
        assert lin.weight.device.type == "cpu" and torch.nn.Linear(2, 2).to(device=0).weight.device.type == "cpu"
        assert torch.empty(2, device=0).device.type == "cpu"
    assert (torch.cuda.set_device, torch.cuda.Stream, torch.cuda.nvtx.range_push) == before
    with ns["_mg_cpu_cuda"](2, False):                      # inactive on a GPU rank: nothing replaced
        assert torch.cuda.set_device is before[0]


@pytest.mark.parametrize("backend,device,comm", [("gloo", "cpu", "gloo"), ("nccl", "cuda", "nccl"),
                                                 ("cpu:gloo,cuda:nccl", "cuda", "nccl")])
def test_accelerator_standin_on_every_pool_kind(monkeypatch, backend, device, comm):
    """A pool that gives CPU tensors gloo is still a GPU pool: buffers must land on the GPU (a CPU receive
    buffer against a GPU send deadlocks a batched ring step)."""
    monkeypatch.setattr(dist, "get_backend", lambda *a: backend)
    ns: dict = {}
    exec(runtime_source(), ns)
    acc = ns["_MgAccelerator"]()
    assert acc.get_current_device().type == device and acc.communication_backend == comm
    assert acc.communication_backend_name() == comm


METRIC = ('''import torch
import torch.distributed as dist


def all_reduce_mean(x):
    t = x.float().sum().clone()
    dist.all_reduce(t)
    return t.item() / dist.get_world_size()
''', ["x"])

RANK_ONLY = ('''import torch
import torch.distributed as dist


def world_info(x):
    dist.barrier()
    return [dist.get_rank(), dist.get_world_size()]
''', ["x"])


def test_returned_metric_is_the_output(monkeypatch):
    """A reduced number returned as a Python float is an output; numbers that ignore the inputs are not."""
    monkeypatch.setitem(CASES, "metric", METRIC)
    res = synthesize(*candidate("metric"), FAST)
    assert res.accepted, (res.reason, res.last_error)
    monkeypatch.setitem(CASES, "rank_only", RANK_ONLY)
    res = synthesize(*candidate("rank_only"), FAST)
    assert not res.accepted and res.reason == "input_insensitive", res.reason


VERSIONED = ('''import torch
import torch.distributed as dist
import packaging.version
from packaging.version import Version
from megatron.core.utils import is_torch_min_version
from fairscale.internal import torch_version


def reduce_if_new_torch(x):
    y = x.clone()
    if is_torch_min_version("2.0.0") and torch_version() >= (1, 12, 0) \\
            and Version(torch.__version__) > packaging.version.parse("1.13.1"):
        dist.all_reduce(y)
    return y * 2
''', ["x"])


def test_version_checks_run_against_the_running_torch(monkeypatch):
    monkeypatch.setitem(CASES, "versioned", VERSIONED)
    res = synthesize(*candidate("versioned"), FAST)
    assert res.accepted, (res.reason, res.last_error)      # with the checks false there is no collective
    ns: dict = {}
    exec(runtime_source(), ns)
    v = ns["_MgVersion"]
    assert v("2.11.0+cu130") > v("2.9") and v("2.11.0a0") == v("2.11") and v("1.13.1") < "2.0"
    assert v("2.11.0+cu130").release == (2, 11, 0) and str(v("2.11.0+cu130")) == "2.11.0"
    assert len({v("2.1"), v("2.1.0")}) == 1                    # equal versions hash alike
    assert ns["_mg_torch_min_version"]("1.0") and not ns["_mg_torch_min_version"]("99.0")
