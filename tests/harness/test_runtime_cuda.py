"""CUDA emulation on CPU ranks (scrapers/harness/make/runtime/cuda_on_cpu.py) is scoped to the call."""

from __future__ import annotations

from mgbench.scrapers.harness.make.render import runtime_source


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
        lin = torch.nn.Linear(2, 2).to(1)  # Module.to(rank), the DDP idiom
        assert lin.weight.device.type == "cpu" and torch.nn.Linear(2, 2).to(device=0).weight.device.type == "cpu"
        assert torch.empty(2, device=0).device.type == "cpu"
    assert (torch.cuda.set_device, torch.cuda.Stream, torch.cuda.nvtx.range_push) == before
    with ns["_mg_cpu_cuda"](2, False):  # inactive on a GPU rank: nothing replaced
        assert torch.cuda.set_device is before[0]


STACKED = """import sys, torch, torch.distributed as dist
from mgbench.scrapers.harness.make.render import runtime_source
rank, store = int(sys.argv[1]), sys.argv[2]
dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
ns = {}
exec(runtime_source(), ns)
x = torch.arange(6.0).view(2, 3) + 10 * rank
with ns["_mg_gloo_stacked"](True):
    out = x.new_empty((2, 2, 3))  # NCCL's stacked form of all_gather_into_tensor
    dist.all_gather_into_tensor(out, x)
    s = x.new_empty(())
    dist.all_gather_into_tensor(g := x.new_empty(2), s.fill_(rank))  # 0-D parts
    flat = x.new_empty(12)  # a flat buffer, as FSDP's flat parameters are gathered
    dist.all_gather_into_tensor(flat, x)
    rs = x.new_empty((2, 3))
    dist.reduce_scatter_tensor(rs, torch.stack([x, x]))  # the stacked input
summed = 2 * torch.arange(6.0).view(2, 3) + 10
assert torch.equal(flat.view(2, 2, 3), out)
assert torch.equal(out[rank], x) and g.tolist() == [0.0, 1.0] and torch.equal(rs, summed), (out, g, rs)
assert dist.all_gather_into_tensor.__module__ == "torch.distributed.distributed_c10d"  # restored after the call
# gloo's threads joined before the interpreter exits: one still running at exit aborts the process
# ("terminate called without an active exception"), seen once in CI
dist.destroy_process_group()
"""


def test_gloo_takes_the_stacked_forms_nccl_documents(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    cmd = [sys.executable, "-c", STACKED]
    procs = [subprocess.Popen([*cmd, str(r), str(tmp_path / "store")], env=env, stderr=subprocess.PIPE) for r in (0, 1)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()[-1500:]
