"""CUDA emulation on CPU ranks (scrapers/harness/runtime_cuda.py) is scoped to the call."""

from __future__ import annotations

from scrapers.harness.render import runtime_source


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
