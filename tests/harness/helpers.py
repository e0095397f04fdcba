"""Shared helpers of the harness tests: hand-written candidate modules (written into tmp folders and
synthesized end to end), candidate records, search budgets, and the module texts and small builders
that more than one test file uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mgbench.scrapers.harness.inputs.search import Budget
from mgbench.scrapers.harness.make.render import runtime_source

CASES = {
    "grad_allreduce": (
        """import torch
import torch.distributed as dist


def allreduce_grad(grad, group):
    dist.all_reduce(grad, group=group)
    grad.div_(dist.get_world_size(group))
""",
        ["grad", "group"],
    ),
    "gather_out": (
        """import torch
import torch.distributed as dist


def gather_rows(output, input_, group=None):
    dist.all_gather_into_tensor(output, input_, group=group)
    return output * 2
""",
        ["output", "input_"],
    ),
    "a2a_splits": (
        """import torch
import torch.distributed as dist


def dispatch(tokens, input_splits, output_splits, group):
    out = tokens.new_empty((sum(output_splits),) + tuple(tokens.shape[1:]))
    dist.all_to_all_single(out, tokens, output_splits, input_splits, group=group)
    return out
""",
        ["tokens", "input_splits", "output_splits", "group"],
    ),
    "divisible": (
        """import torch
import torch.distributed as dist


def shard_reduce(x, hidden):
    ws = dist.get_world_size()
    assert hidden % ws == 0, "hidden must be divisible by the world size"
    y = x[: hidden].reshape(ws, hidden // ws).sum(0)
    out = torch.empty(hidden // ws)
    dist.reduce_scatter_tensor(out, y.repeat(ws).contiguous())
    return out
""",
        ["x", "hidden"],
    ),
    "parallel_state": (
        """import torch
import torch.distributed as dist
from megatron.core import parallel_state


def reduce_from_tp(input_):
    if parallel_state.get_tensor_model_parallel_world_size() == 1:
        return input_
    dist.all_reduce(input_, group=parallel_state.get_tensor_model_parallel_group())
    return input_
""",
        ["input_"],
    ),
    "loops": (
        """import torch.distributed as dist


def spin(x):
    while True:
        pass
""",
        ["x"],
    ),
    "allocates": (
        """import torch.distributed as dist


def hog(x):
    keep = []
    while True:
        keep.append(bytearray(64 * 2**20))
""",
        ["x"],
    ),
    "writes": (
        """import torch.distributed as dist


def leak(x):
    with open("/tmp/mgbench_harness_escape.txt", "w") as f:
        f.write("x")
    dist.all_reduce(x)
    return x
""",
        ["x"],
    ),
    # a platform check at module level, as Triton-distributed's utils do (`shutil.which("nvidia-smi")`)
    "probes_machine": (
        """import shutil
import torch
import torch.distributed as dist

if shutil.which("sh") or shutil.which("nvidia-smi") or torch.cuda.is_available():
    raise RuntimeError("the search machine's tools or GPUs are visible")


def reduce_on_any_machine(x):
    dist.all_reduce(x)
    return x
""",
        ["x"],
    ),
    "spawns": (
        """import subprocess
import torch.distributed as dist


def shell(x):
    subprocess.run(["true"])
    dist.all_reduce(x)
    return x
""",
        ["x"],
    ),
}

# Candidates that need a stand-in for a repository global or a synthesized object (test_sandboxed_standins.py)
STANDIN_CASES = {
    "colossal_gpc": (
        """import torch
import torch.distributed as dist
from colossalai.legacy.context.parallel_mode import ParallelMode
from colossalai.legacy.core import global_context as gpc
from colossalai.testing import parameterize


@parameterize("unused", [1])
def reduce_tensor_1d(input_):
    if gpc.get_world_size(ParallelMode.PARALLEL_1D) == 1:
        return input_
    dist.all_reduce(input_, group=gpc.get_group(ParallelMode.PARALLEL_1D))
    return input_ * (gpc.get_local_rank(ParallelMode.PARALLEL_1D) + 1)
""",
        ["input_"],
    ),
    "pg_collection": (
        """import torch
import torch.distributed as dist
import pytest


@pytest.mark.parametrize("x", [1])
def gather_tp(x, pg_collection):
    out = [torch.empty_like(x) for _ in range(dist.get_world_size(pg_collection.tp))]
    dist.all_gather(out, x, group=pg_collection.tp)
    return torch.cat(out)
""",
        ["x", "pg_collection"],
    ),
    "config_obj": (
        """import torch
import torch.distributed as dist


def scaled_allreduce(grad, config):
    if config.average_in_collective:
        grad = grad / dist.get_world_size()
    dist.all_reduce(grad)
    return grad * config.gradient_scale
""",
        ["grad", "config"],
    ),
    "dict_arg": (
        """import torch
import torch.distributed as dist


def reduce_batch(batch):
    loss = batch["loss"].clone()
    dist.all_reduce(loss)
    return loss
""",
        ["batch"],
    ),
    "main_grad": (
        """import torch
import torch.distributed as dist


def allreduce_main_grads(param):
    dist.all_reduce(param.main_grad)
    return param.main_grad / dist.get_world_size()
""",
        ["param"],
    ),
}
CASES.update(STANDIN_CASES)


def candidate(name: str) -> tuple[dict[str, Any], str]:
    """(candidate record in the scrapers' schema, module text) of one case."""
    text, params = CASES[name]
    entry = text.split("\ndef ")[1].split("(")[0]
    cid = "c" + format(abs(hash(name)) % 16**15, "015x")
    return {
        "id": cid,
        "schema": 1,
        "qualname": entry,
        "entry": entry,
        "kind": "function",
        "role": "library",
        "provenance": {
            "repo": "example/mined",
            "path": f"{name}.py",
            "commit": "0" * 40,
            "line_start": 1,
            "line_end": text.count("\n"),
            "license": "MIT",
            "url": f"https://github.com/example/mined/blob/{'0' * 40}/{name}.py",
        },
        "params": [
            {
                "name": p,
                "kind": "positional",
                "annotation": None,
                "default": "None" if p == "group" and name == "gather_out" else None,
            }
            for p in params
        ],
        "docstring": None,
        "classification": {"realizations": [], "dims": [], "workload": None, "families": []},
        "unique": True,
        "license_permitted": True,
        "module_path": f"modules/{cid}.py",
    }, text


def entry_candidate(
    text: str, entry: str, kind: str = "function", params: list[str] | tuple[str, ...] = ()
) -> tuple[dict[str, Any], str]:
    """(candidate record, module text) for one entry of a test's own module text: a function, or a method
    (`Class.method`, whose `params` start with `self`)."""
    cand, _ = candidate("divisible")
    cand.update(
        id="c" + format(abs(hash(entry)) % 16**15, "015x"),
        kind=kind,
        entry=entry,
        qualname=entry,
        params=[{"name": p, "kind": "positional", "annotation": None, "default": None} for p in params],
    )
    cand["module_path"] = f"modules/{cand['id']}.py"
    return cand, text


def scrape_folder(root: Path, names: list[str]) -> Path:
    """A scrape output folder (candidates.jsonl + modules/) holding the named cases."""
    (root / "modules").mkdir(parents=True, exist_ok=True)
    with (root / "candidates.jsonl").open("w") as f:
        for n in names:
            cand, text = candidate(n)
            (root / cand["module_path"]).write_text(text)
            f.write(json.dumps(cand) + "\n")
    return root


FAST_8_NO_WS4 = Budget(seconds=40, attempts=8, attempt_timeout_s=6, mem_mb=512, ws4_attempts=0)


FAST_12 = Budget(seconds=40, attempts=12, attempt_timeout_s=6, mem_mb=512)


FAST_14 = Budget(seconds=40, attempts=14, attempt_timeout_s=6, mem_mb=512)


FAST_14_NO_WS4 = Budget(seconds=40, attempts=14, attempt_timeout_s=6, mem_mb=512, ws4_attempts=0)


ROW_LINEAR = '''import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn import Parameter
from repo.shard import shard_rows, seeded_init


class RowLinear(torch.nn.Module):
    """Row-parallel linear.

    Args:
        in_features (int): input size.
        out_features (int): output size.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, process_group=None,
                 weight=None, mode: str = "sum", chunks: int = 1, gather_output=False):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.process_group = process_group
        self.mode = mode
        self.chunks = chunks
        self.world = dist.get_world_size(process_group)
        self.rank = dist.get_rank(process_group)
        self.gather_output = gather_output
        if weight is None:
            self.weight = Parameter(torch.empty(out_features, in_features))
        else:
            self.weight = weight
        self.bias = Parameter(torch.zeros(out_features)) if bias else None
        self.index = torch.zeros((4,), dtype=torch.long)
        self.helper = seeded_init(self.weight)      # repository code: not drawable
        shard_rows(self.weight, process_group)

    @property
    def shape(self):
        return self.weight.shape

    def forward(self, x):
        assert x.shape[-1] == self.shape[-1], "bad input"
        y = F.linear(x, self.weight)
        dist.all_reduce(y, group=self.process_group)
        return y + self.bias if self.mode == "sum" else y
'''


REPO = {
    "pkg/__init__.py": "from .ops import scale_sum\n",
    "pkg/consts.py": "FACTOR = 3.0\nOTHER = 7\n",
    "pkg/norm.py": """import torch

EPS = 1e-6


def _norm(x):
    return x / (x.abs().max() + EPS)
""",
    "pkg/ops.py": """import math

import torch
from pkg.consts import FACTOR
from .norm import _norm as normalize


def scale_sum(x):
    return normalize(x) * FACTOR + math.sqrt(4.0)


def unused(x):
    return x
""",
    "tests/unit/helpers.py": """import torch


def double(x):
    return x * 2
""",
    "pkg/gpu.py": """import fancy_gpu_lib


@fancy_gpu_lib.jit
def kernel(x):
    return x


def via_lib(x):
    return fancy_gpu_lib.op(x)
""",
}


CANDIDATES = {
    "reduce_scaled": """import torch
import torch.distributed as dist
from pkg import scale_sum


def reduce_scaled(x, group):
    y = scale_sum(x)
    dist.all_reduce(y, group=group)
    return y
""",
    "reduce_lib": """import torch
import torch.distributed as dist
from pkg.gpu import via_lib, kernel


def reduce_lib(x, group):
    if x.numel() < 0:
        return kernel(x)
    y = via_lib(x)
    dist.all_reduce(y, group=group)
    return y
""",
}


def _candidate(name: str) -> dict:
    return {
        "id": "c" + format(abs(hash(name)) % 16**15, "015x"),
        "schema": 1,
        "qualname": name,
        "entry": name,
        "kind": "function",
        "role": "library",
        "provenance": {
            "repo": "example/mined",
            "path": f"mined/{name}.py",
            "commit": "0" * 40,
            "line_start": 1,
            "line_end": 9,
            "license": "MIT",
            "url": f"https://github.com/example/mined/blob/{'0' * 40}/mined/{name}.py",
        },
        "params": [
            {"name": "x", "kind": "positional", "annotation": None, "default": None},
            {"name": "group", "kind": "positional", "annotation": None, "default": None},
        ],
        "docstring": None,
        "classification": {"realizations": [], "dims": [], "workload": None, "families": []},
        "unique": True,
        "license_permitted": True,
        "module_path": f"modules/{name}.py",
    }


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    src = tmp_path / "src" / "mined"
    for rel, text in REPO.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    scrape = tmp_path / "scrape"
    (scrape / "modules").mkdir(parents=True)
    with (scrape / "candidates.jsonl").open("w") as f:
        for name, text in CANDIDATES.items():
            (scrape / "modules" / f"{name}.py").write_text(text)
            f.write(json.dumps(_candidate(name)) + "\n")
    return tmp_path / "src", scrape


LOCAL = """import torch.distributed as dist


def grad_sync(model):
    from megatron.core import mpu
    for p in model.parameters():
        dist.all_reduce(p.grad, group=mpu.get_data_parallel_group())
"""


def _cand(name: str, params: list[str]) -> dict:
    return {
        "id": "c0",
        "qualname": name,
        "entry": name,
        "kind": "function",
        "role": "library",
        "provenance": {
            "repo": "x/y",
            "path": "a.py",
            "commit": "0" * 40,
            "line_start": 1,
            "line_end": 9,
            "license": "MIT",
            "url": "u",
        },
        "docstring": None,
        "params": [{"name": p, "kind": "positional", "annotation": None, "default": None} for p in params],
    }


def _spec_of_args(*args):
    return {"entry": "f", "kind": "function", "args": list(args), "attrs": []}


CAND = {"kind": "function", "entry": "f", "params": [{"name": "x", "kind": "positional"}]}


T = {"name": "x", "kind": "tensor", "shape": ["n"], "dtype": "float32"}


def _method(text: str, entry: str) -> tuple[dict, str]:
    """A method candidate (`Class.method`, taking only `self`)."""
    return entry_candidate(text, entry, "method", ["self"])


def _function(text: str, entry: str, params: list[str]) -> tuple[dict, str]:
    return entry_candidate(text, entry, "function", params)


ANNOTATED = """from typing import Dict, List, Optional
import torch
import torch.distributed as dist
from megatron.core.optimizer import MegatronOptimizer
import transformer_engine as te


class Holder:
    opts: Optional[MegatronOptimizer] = None
    plain: MegatronOptimizer = None


def reduce_all(x: torch.Tensor, opts: List[MegatronOptimizer] = None, cfg: te.Config = None,
               other: MegatronOptimizer | None = None) -> Dict[str, MegatronOptimizer]:
    dist.all_reduce(x)
    return x


def uses_optimizer(x):
    return MegatronOptimizer(x)
"""


def _load(body: str, standins: str = "") -> dict:
    ns: dict = {}
    # test-authored code only (not mined); dont_inherit: this file's `from __future__ import annotations`
    exec(compile(runtime_source() + "\n" + standins + "\n" + body, "<task>", "exec", dont_inherit=True), ns)
    return ns


TRITON = """import torch
import torch.distributed as dist
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4)], key=["n"])
@triton.jit
def _scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)


def reference_all_reduce(x, group=None):
    y = x * 2
    dist.all_reduce(y, group=group)
    return y


def launched_all_reduce(x, group=None):
    _scale_kernel[(triton.cdiv(x.numel(), 128),)](x, x.numel())
    dist.all_reduce(x, group=group)
    return x
"""


COLUMN_PARALLEL = """import torch
import torch.distributed as dist


class CopyToTensorParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, weight):
        ctx.save_for_backward(input_, weight)
        return input_ @ weight.t()

    @staticmethod
    def backward(ctx, grad_output):
        input_, weight = ctx.saved_tensors
        grad_input = grad_output @ weight
        dist.all_reduce(grad_input)
        return grad_input, grad_output.t() @ input_


class LocalOnly(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        if x.numel() < 0:
            dist.all_reduce(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2
"""


CODE = """import torch
import torch.distributed as dist


def stubborn(x):
    dist.all_reduce(x)
    raise ValueError("this entry never works")


def sized(x, hd):
    y = torch.ones(2, hd) * x.sum()
    dist.all_reduce(y)
    return y


def unpacked(x):
    b, s, h = x.shape
    dist.all_reduce(x)
    return x.reshape(b * s, h) * 2


def configured(x, config):
    m = config["M"]
    dist.all_reduce(x)
    return x * m
"""


def _spec_json(**args: dict) -> str:
    return json.dumps(
        {
            "entry": "f",
            "kind": "function",
            "attrs": [],
            "n_attr": 8,
            "args": [{"name": k, **v} for k, v in args.items()],
        },
        sort_keys=True,
    )


def _t(name: str, shape: list[str] | None = None) -> dict:
    return {"name": name, "kind": "tensor", "shape": shape or ["n"], "dtype": "float32", "replicated": False}


OPT_FN = """import torch
import torch.distributed as dist


def sync_and_step(optimizer, group):
    for pg in optimizer.param_groups:
        for p in pg["params"]:
            dist.all_reduce(p.grad, group=group)
            p.data.add_(p.grad, alpha=-pg["lr"])
"""
