"""End-to-end: the runtime hosts script-style entries, emulates CUDA placement, streams and version checks
on sandboxed CPU ranks."""

from __future__ import annotations

import pytest

from mgbench.scrapers.harness.inputs.search import synthesize
from mgbench.scrapers.harness.make.render import runtime_source
from tests.harness.helpers import CASES, candidate
from tests.harness.helpers import FAST_12 as FAST

pytestmark = pytest.mark.sandboxed  # runs candidates or tasks through child rank processes


SCRIPT = (
    """import argparse
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
""",
    ["x"],
)


def test_script_style_entry_is_hosted(monkeypatch):
    """init_process_group/destroy_process_group/argparse inside the entry: accepted, and the group survives
    the reruns of the acceptance checks (destroy was a no-op)."""
    monkeypatch.setitem(CASES, "script_main", SCRIPT)
    cand, text = candidate("script_main")
    res = synthesize(cand, text, FAST)
    assert res.accepted, (res.reason, res.last_error)


GPU_PLACED = (
    """import torch
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
""",
    ["x"],
)


TRITON_LIKE = (
    """import torch
import torch.distributed as dist


def needs_a_real_gpu(x):
    y = x.cuda()
    dist.all_reduce(y)
    return torch.cuda.get_device_properties(0).multi_processor_count * y
""",
    ["x"],
)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="emulation is for CPU-only ranks")
def test_cuda_placement_is_emulated_on_cpu_ranks(monkeypatch):
    monkeypatch.setitem(CASES, "gpu_placed", GPU_PLACED)
    cand, text = candidate("gpu_placed")
    res = synthesize(cand, text, FAST)
    assert res.accepted, (res.reason, res.last_error)
    monkeypatch.setitem(CASES, "triton_like", TRITON_LIKE)
    cand, text = candidate("triton_like")
    res = synthesize(cand, text, FAST)  # device queries beyond placement: still a GPU need
    assert not res.accepted and res.reason.startswith("needs_gpu"), res.reason


VERSIONED = (
    """import torch
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
""",
    ["x"],
)


def test_version_checks_run_against_the_running_torch(monkeypatch):
    monkeypatch.setitem(CASES, "versioned", VERSIONED)
    res = synthesize(*candidate("versioned"), FAST)
    assert res.accepted, (res.reason, res.last_error)  # with the checks false there is no collective
    ns: dict = {}
    exec(runtime_source(), ns)
    v = ns["_MgVersion"]
    assert v("2.11.0+cu130") > v("2.9") and v("2.11.0a0") == v("2.11") and v("1.13.1") < "2.0"
    assert v("2.11.0+cu130").release == (2, 11, 0) and str(v("2.11.0+cu130")) == "2.11.0"
    assert len({v("2.1"), v("2.1.0")}) == 1  # equal versions hash alike
    assert ns["_mg_torch_min_version"]("1.0") and not ns["_mg_torch_min_version"]("99.0")


STREAM = (
    """import torch
import torch.distributed as dist


def all_gather_sync(stream, x):
    with torch.cuda.stream(stream):
        out = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(out, x)
    stream.synchronize()
    return torch.cat(out)
""",
    ["stream", "x"],
)


def test_stream_argument_is_a_stream_not_a_tensor(monkeypatch):
    """A `stream` parameter gets the rank's stream (a stand-in on CPU ranks). Guessed as a tensor it passed
    on CPU, where stream calls are emulated, and failed on GPU (`'Tensor' object has no attribute 'stream_id'`)."""
    monkeypatch.setitem(CASES, "stream", STREAM)
    res = synthesize(*candidate("stream"), FAST)
    assert res.accepted, (res.reason, res.last_error)
    assert res.spec["args"][0] == {"name": "stream", "kind": "stream"}
    from mgbench.scrapers.harness.inputs.discovery.name_guess import guess_arg

    assert guess_arg("use_stream", None, None)["kind"] == "bool" and guess_arg("stream", "bool", None)["kind"] == "bool"
    assert guess_arg("comm_stream", "torch.cuda.Stream", None)["kind"] == "stream"
    ns: dict = {}
    exec(runtime_source(), ns)
    assert type(ns["_mg_value"]({"kind": "stream"}, 0, 0, 0, 2, 8, "cpu")).__name__ == "_MgCudaStandIn"
