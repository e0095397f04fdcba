"""Harness rules of session 4 (scrapers/harness): the accelerator interface of DeepSpeed/ColossalAI
(`get_accelerator().manual_seed`, tensor factories, device count) and `pytest.param` in test candidates."""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from scrapers.harness.render import runtime_source
from scrapers.harness.search import Budget, synthesize
from tests.harness_cases import CASES, candidate

FAST = Budget(seconds=40, attempts=12, attempt_timeout_s=6, mem_mb=512)


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


SEEDED = ('''import pytest
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
''', ["x"])


def test_seeded_test_with_params_is_accepted(monkeypatch):
    """A DeepSpeed-style test that seeds through the accelerator and is parametrized with pytest.param:
    accepted, and its output still depends on the inputs (the seeded noise alone would be insensitive)."""
    monkeypatch.setitem(CASES, "seeded", SEEDED)
    res = synthesize(*candidate("seeded"), FAST)
    assert res.accepted, (res.reason, res.last_error)


STAR_REPO = {
    "lib/__init__.py": "",
    "lib/nn/__init__.py": "from .layer import *\nfrom .loss import *\n",
    "lib/nn/layer/__init__.py": "from .linear import *\n",
    "lib/nn/layer/linear.py": "import torch\n\n__all__ = ['ShardLinear']\n\n\nclass ShardLinear:\n"
                              "    def __init__(self, scale):\n        self.scale = scale\n\n"
                              "    def __call__(self, x):\n        return x * self.scale\n",
    "lib/nn/loss.py": "def _private():\n    return 0\n",
}


def test_star_reexport_is_followed_to_the_defining_file(tmp_path):
    """`from lib.nn import ShardLinear` where lib/nn re-exports `from .layer import *` (two levels): the class
    is inlined from lib/nn/layer/linear.py with its span; a name nothing binds stays missing."""
    from scrapers.harness.inline import inline_candidate
    from tests.test_harness_inline import _candidate
    for rel, text in STAR_REPO.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    text = "import torch\nfrom lib.nn import ShardLinear, Missing\n\n\ndef f(x):\n    return ShardLinear(2.0)(x)\n"
    rec = inline_candidate(_candidate("f"), text, tmp_path)
    assert rec.names == ["ShardLinear"] and rec.spans[0]["path"] == "lib/nn/layer/linear.py"
    assert rec.spans[0]["line_start"] == 6 and "not found" in rec.skipped["lib.nn.Missing"]


def test_trace_reports_every_attempt():
    """--trace: one line per attempt with the spec tried and its outcome, ending in the accepted one."""
    lines: list[str] = []
    res = synthesize(*candidate("divisible"), FAST, lines.append)
    assert res.accepted and 1 <= len(lines) <= res.attempts
    assert lines[0].startswith("#1 ws2 ") and "hidden:" in lines[0] and lines[-1].split("-> ")[1].startswith("ok")


def test_line_budget_failure_of_one_candidate_does_not_block_the_helper_for_others(tmp_path):
    """The line budget is per candidate: a helper that did not fit after a large import of candidate A is
    still inlined for candidate B (it used to be remembered as failed for the whole checkout)."""
    from scrapers.harness.inline import inline_candidate
    from tests.test_harness_inline import _candidate
    big = "TABLE = [\n" + "".join(f"    {i},\n" for i in range(30)) + "]\n"
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "big.py").write_text(big)
    (tmp_path / "pkg" / "small.py").write_text("def helper(x):\n    return x * 2\n")
    a = "import torch\nfrom pkg.big import TABLE\nfrom pkg.small import helper\n\n\ndef a(x):\n    return helper(x)[TABLE[0]]\n"
    b = "import torch\nfrom pkg.small import helper\n\n\ndef b(x):\n    return helper(x)\n"
    ra = inline_candidate(_candidate("a"), a, tmp_path, max_lines=33)
    assert ra.names == ["TABLE"] and "closure over" in ra.skipped["pkg.small.helper"]
    rb = inline_candidate(_candidate("b"), b, tmp_path, max_lines=33)
    assert rb.names == ["helper"] and not rb.skipped
    # a whole-module import needs what the candidate uses of it: one candidate's missing attribute is not cached
    whole = "import torch\nimport pkg.small as S\n\n\ndef {f}(x):\n    return S.{attr}(x)\n"
    rc = inline_candidate(_candidate("c"), whole.format(f="c", attr="nothing_here"), tmp_path)
    assert "not defined" in rc.skipped["pkg.small"]
    rd = inline_candidate(_candidate("d"), whole.format(f="d", attr="helper"), tmp_path)
    assert rd.names == ["S"] and not rd.skipped


STREAM = ('''import torch
import torch.distributed as dist


def all_gather_sync(stream, x):
    with torch.cuda.stream(stream):
        out = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(out, x)
    stream.synchronize()
    return torch.cat(out)
''', ["stream", "x"])


def test_stream_argument_is_a_stream_not_a_tensor(monkeypatch):
    """A `stream` parameter gets the rank's stream (a stand-in on CPU ranks). Guessed as a tensor it passed
    on CPU, where stream calls are emulated, and failed on GPU (`'Tensor' object has no attribute 'stream_id'`)."""
    monkeypatch.setitem(CASES, "stream", STREAM)
    res = synthesize(*candidate("stream"), FAST)
    assert res.accepted, (res.reason, res.last_error)
    assert res.spec["args"][0] == {"name": "stream", "kind": "stream"}
    from scrapers.harness.guess import guess_arg
    assert guess_arg("use_stream", None, None)["kind"] == "bool" and guess_arg("stream", "bool", None)["kind"] == "bool"
    assert guess_arg("comm_stream", "torch.cuda.Stream", None)["kind"] == "stream"
    ns: dict = {}
    exec(runtime_source(), ns)
    assert type(ns["_mg_value"]({"kind": "stream"}, 0, 0, 0, 2, 8, "cpu")).__name__ == "_MgCudaStandIn"


def test_full_size_keeps_every_input_under_the_element_cap():
    """Full size is n = 1024 unless an input would pass FULL_MAX_ELEMS at world size 8: a 4-D input
    `[n, n, n, n]` (4 TiB at 1024) gets n = 64; never below twice the smoke size."""
    from scrapers.harness.render import FULL_MAX_ELEMS, full_n
    t = lambda *shape: {"args": [{"name": "x", "kind": "tensor", "shape": list(shape)}]}   # noqa: E731
    assert full_n(t("n", "n")) == 1024 and full_n(t("n", "n", "n", "n")) == 64
    assert full_n(t("n*ws", "n", "n")) == 128 and 128 * 8 * 128 * 128 <= FULL_MAX_ELEMS
    assert full_n(t("n", "n", "n", "n", "n", "n")) == 16
    field = {"args": [{"name": "p", "kind": "tensor", "shape": ["n"],
                       "fields": [{"name": "main_grad", "kind": "tensor", "shape": ["n", "n", "n"]}]}]}
    assert full_n(field) == 256
    attr = {"args": [{"name": "x", "kind": "tensor", "shape": ["n"]}],     # attributes stay at n_attr = 8
            "attrs": [{"name": "w", "kind": "tensor", "shape": ["n", "n", "n"]}]}
    assert full_n(attr) == 1024


def test_prelude_that_raises_when_loaded_is_dropped(tmp_path):
    """An inlined helper whose module raises at load on this platform (Triton-distributed's `if is_cuda():
    ... else: raise Exception("either CUDA or HIP platform is supported")`) would reject a candidate that never
    calls it: the search is repeated without the prelude, and the reason is kept."""
    import json

    from scrapers.harness import driver
    from tests.test_harness_inline import _candidate
    src = tmp_path / "src" / "mined" / "pkg"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "plat.py").write_text('import shutil\n\nif shutil.which("no-such-smi-mgbench"):\n    BACKEND = "gpu"\n'
                                 'else:\n    raise Exception("either CUDA or HIP platform is supported")\n\n\n'
                                 'def finalize():\n    return BACKEND\n')
    scrape = tmp_path / "scrape"
    (scrape / "modules").mkdir(parents=True)
    text = ("import torch\nimport torch.distributed as dist\nfrom pkg.plat import finalize\n\n\n"
            "def reduce_twice(x, group):\n    dist.all_reduce(x, group=group)\n    return x * 2\n\n\n"
            "if __name__ == '__main__':\n    finalize()\n")
    (scrape / "modules" / "reduce_twice.py").write_text(text)
    (scrape / "candidates.jsonl").write_text(json.dumps(_candidate("reduce_twice")) + "\n")
    dest = driver.run(scrape, tmp_path / "out", budget=FAST, quiet=True, src=tmp_path / "src")
    res = json.loads(dest.read_text().splitlines()[-1])
    assert res["accepted"], res
    assert "inline" not in res and "prelude failed to load" in res["inline_skipped"]["*"]
    assert "either CUDA or HIP" in res["inline_skipped"]["*"]


def test_timing_copies_keep_attributes_set_on_tensors():
    """Timed runs rotate cloned inputs; a synthesized `grad.codecs` / `param.main_grad` must survive the copy
    (torchrec `AllGatherBase_Req` failed its GPU timing with `'Tensor' object has no attribute 'codecs'`)."""
    from validation.checks import clone_tree
    x = torch.randn(4)
    x.main_grad = torch.zeros(4)
    x.codecs = None
    (y,) = clone_tree((x,))
    assert y.codecs is None and torch.equal(y.main_grad, x.main_grad) and y.main_grad is not x.main_grad
    assert y.data_ptr() != x.data_ptr()
    buf = torch.zeros(4)
    a, b = torch.ones(2), torch.ones(2)
    a.main_grad, b.main_grad, a.me = buf, buf, a        # shared buffer and a cycle
    a2, b2 = clone_tree([a, b])
    assert a2.main_grad is b2.main_grad and a2.me is a2 and a2.main_grad is not buf


GLOBAL_ARGS = ('''import torch
import torch.distributed as dist
from megatron.training import get_args


def loss_func(loss_mask, output_tensor):
    args = get_args()
    loss = torch.sum(output_tensor.float() * loss_mask.float()).view(1)
    if args.context_parallel_size > 1:
        dist.all_reduce(loss)
    dist.all_reduce(loss)
    return loss
''', ["loss_mask", "output_tensor"])


def test_megatron_get_args_is_a_synthesized_module_global(monkeypatch):
    """`get_args()` returns the module global `args`, built like any missing global (a namespace whose fields
    come from the AttributeErrors): Megatron's real one asserts 'args is not initialized'."""
    monkeypatch.setitem(CASES, "global_args", GLOBAL_ARGS)
    res = synthesize(*candidate("global_args"), FAST)
    assert res.accepted, (res.reason, res.last_error)
    (g,) = res.spec["globals"]
    assert g["name"] == "args" and g["kind"] == "namespace"
    assert [f["name"] for f in g["fields"]] == ["context_parallel_size"]
