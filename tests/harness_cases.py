"""Hand-written candidate modules for the harness tests (written into tmp folders by the tests)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CASES = {
    "grad_allreduce": ("""import torch
import torch.distributed as dist


def allreduce_grad(grad, group):
    dist.all_reduce(grad, group=group)
    grad.div_(dist.get_world_size(group))
""", ["grad", "group"]),
    "gather_out": ("""import torch
import torch.distributed as dist


def gather_rows(output, input_, group=None):
    dist.all_gather_into_tensor(output, input_, group=group)
    return output * 2
""", ["output", "input_"]),
    "a2a_splits": ("""import torch
import torch.distributed as dist


def dispatch(tokens, input_splits, output_splits, group):
    out = tokens.new_empty((sum(output_splits),) + tuple(tokens.shape[1:]))
    dist.all_to_all_single(out, tokens, output_splits, input_splits, group=group)
    return out
""", ["tokens", "input_splits", "output_splits", "group"]),
    "divisible": ("""import torch
import torch.distributed as dist


def shard_reduce(x, hidden):
    ws = dist.get_world_size()
    assert hidden % ws == 0, "hidden must be divisible by the world size"
    y = x[: hidden].reshape(ws, hidden // ws).sum(0)
    out = torch.empty(hidden // ws)
    dist.reduce_scatter_tensor(out, y.repeat(ws).contiguous())
    return out
""", ["x", "hidden"]),
    "parallel_state": ("""import torch
import torch.distributed as dist
from megatron.core import parallel_state


def reduce_from_tp(input_):
    if parallel_state.get_tensor_model_parallel_world_size() == 1:
        return input_
    dist.all_reduce(input_, group=parallel_state.get_tensor_model_parallel_group())
    return input_
""", ["input_"]),
    "loops": ("""import torch.distributed as dist


def spin(x):
    while True:
        pass
""", ["x"]),
    "allocates": ("""import torch.distributed as dist


def hog(x):
    keep = []
    while True:
        keep.append(bytearray(64 * 2**20))
""", ["x"]),
    "writes": ("""import torch.distributed as dist


def leak(x):
    with open("/tmp/mgbench_harness_escape.txt", "w") as f:
        f.write("x")
    dist.all_reduce(x)
    return x
""", ["x"]),
    "spawns": ("""import subprocess
import torch.distributed as dist


def shell(x):
    subprocess.run(["true"])
    dist.all_reduce(x)
    return x
""", ["x"]),
}

# Candidates that need a stand-in for a repository global or a synthesized object (tests/test_harness_standins.py)
STANDIN_CASES = {
    "colossal_gpc": ("""import torch
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
""", ["input_"]),
    "pg_collection": ("""import torch
import torch.distributed as dist
import pytest


@pytest.mark.parametrize("x", [1])
def gather_tp(x, pg_collection):
    out = [torch.empty_like(x) for _ in range(dist.get_world_size(pg_collection.tp))]
    dist.all_gather(out, x, group=pg_collection.tp)
    return torch.cat(out)
""", ["x", "pg_collection"]),
    "config_obj": ("""import torch
import torch.distributed as dist


def scaled_allreduce(grad, config):
    if config.average_in_collective:
        grad = grad / dist.get_world_size()
    dist.all_reduce(grad)
    return grad * config.gradient_scale
""", ["grad", "config"]),
    "dict_arg": ("""import torch
import torch.distributed as dist


def reduce_batch(batch):
    loss = batch["loss"].clone()
    dist.all_reduce(loss)
    return loss
""", ["batch"]),
    "main_grad": ("""import torch
import torch.distributed as dist


def allreduce_main_grads(param):
    dist.all_reduce(param.main_grad)
    return param.main_grad / dist.get_world_size()
""", ["param"]),
}
CASES.update(STANDIN_CASES)


def candidate(name: str) -> tuple[dict[str, Any], str]:
    """(candidate record in the scrapers' schema, module text) of one case."""
    text, params = CASES[name]
    entry = text.split("\ndef ")[1].split("(")[0]
    cid = "c" + format(abs(hash(name)) % 16**15, "015x")
    return {"id": cid, "schema": 1, "qualname": entry, "entry": entry, "kind": "function", "role": "library",
            "provenance": {"repo": "example/mined", "path": f"{name}.py", "commit": "0" * 40, "line_start": 1,
                           "line_end": text.count("\n"), "license": "MIT",
                           "url": f"https://github.com/example/mined/blob/{'0' * 40}/{name}.py"},
            "params": [{"name": p, "kind": "positional", "annotation": None,
                        "default": "None" if p == "group" and name == "gather_out" else None} for p in params],
            "docstring": None, "classification": {"realizations": [], "dims": [], "workload": None,
                                                  "families": []},
            "unique": True, "license_permitted": True, "module_path": f"modules/{cid}.py"}, text


def entry_candidate(text: str, entry: str, kind: str = "function",
                    params: list[str] | tuple[str, ...] = ()) -> tuple[dict[str, Any], str]:
    """(candidate record, module text) for one entry of a test's own module text: a function, or a method
    (`Class.method`, whose `params` start with `self`)."""
    cand, _ = candidate("divisible")
    cand.update(id="c" + format(abs(hash(entry)) % 16**15, "015x"), kind=kind, entry=entry, qualname=entry,
                params=[{"name": p, "kind": "positional", "annotation": None, "default": None} for p in params])
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
