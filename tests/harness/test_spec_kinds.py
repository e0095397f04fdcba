"""Spec kinds: every kind the search's rules and guesses write is in specs.SCHEMA, and every kind in the
schema is drawn by the task-side runtime (a rendered task's make_inputs and solution, in a child process)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mgbench.scrapers.harness.make import specs
from mgbench.scrapers.harness.make.render import prepare, task_source

HARNESS = Path(specs.__file__).parents[1]
WRITERS = [
    *sorted((HARNESS / "inputs" / "rules").glob("*.py")),
    *(
        HARNESS / f"{m}.py"
        for m in (
            "inputs/discovery/guess",
            "inputs/discovery/name_guess",
            "inputs/discovery/initattrs",
            "inputs/discovery/cases",
            "inputs/initial",
            "inputs/containerfix",
            "inputs/sizefix",
            "inputs/optimfix",
            "inputs/peerfix",
            "inputs/statefix",
            "make/specs",
            "make/specedit",
        )
    ),
]
CONSTRUCTORS = {"arg": 1, "optim_arg": 1}  # constructor -> position of its kind argument


def written_kinds() -> set[str]:
    """Kinds in argument dict literals (`{"name": ..., "kind": "tensor"}`, not a spec's own "kind", which
    sits beside "entry") and in calls of the generic constructors."""
    out = set()
    for path in WRITERS:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict):
                keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
                for k, v in zip(node.keys, node.values):
                    if (
                        isinstance(k, ast.Constant)
                        and k.value == "kind"
                        and isinstance(v, ast.Constant)
                        and "entry" not in keys
                    ):
                        out.add(v.value)
            elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
                name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
                pos = CONSTRUCTORS.get(name)
                if pos is not None and len(node.args) > pos and isinstance(node.args[pos], ast.Constant):
                    out.add(node.args[pos].value)
    return out


def test_every_kind_the_rules_write_is_in_the_schema():
    kinds = written_kinds()
    assert {"tensor", "tensors", "int", "group", "namespace", "fn", "module", "optim_state"} <= kinds
    assert kinds <= set(specs.SCHEMA), kinds - set(specs.SCHEMA)


def test_a_constructor_refuses_a_key_its_kind_does_not_take():
    assert specs.tensor("x", ["n"]) == {"name": "x", "kind": "tensor", "shape": ["n"], "dtype": "float32"}
    with pytest.raises(specs.SpecError, match="unexpected 'expr'"):
        specs.arg("x", "tensor", expr="n")
    with pytest.raises(specs.SpecError, match="unknown kind"):
        specs.arg("x", "tensorz")
    assert specs.spec_problems(
        {"args": [{"name": "c", "kind": "namespace", "fields": [{"name": "f", "kind": "int", "chunks": 2}]}]}
    ) == ["'f' (int): unexpected 'chunks'"]


# one argument per kind, and what the mined entry must receive for it
SAMPLES = {
    "tensor": ({"shape": ["n"], "dtype": "float32"}, "Tensor"),
    "tensors": ({"shape": ["n"], "count": "ws"}, "list"),
    "module": ({"shape": ["n"], "count": "2", "dtype": "float32"}, "Module"),
    "linear": ({"shape": ["n", "n"], "dtype": "float32", "replicated": True}, "Module"),
    "int": ({"expr": "n"}, "int"),
    "splits": ({"expr": "n"}, "list"),
    "float": ({"value": 0.5}, "float"),
    "bool": ({"value": True}, "bool"),
    "none": ({}, "NoneType"),
    "const": ({"value": [1, 2]}, "list"),
    "member": ({"value": "Mode.REDUCE_SCATTER"}, "Mode"),  # an enum member the mined module defines
    "literal": ({"value": "sum"}, "str"),
    "dtype": ({"value": "float32"}, "dtype"),
    "device": ({}, "device"),
    "fn": ({"value": "gelu"}, "callable"),
    "path": ({"value": "pathlib"}, "Path"),
    "stream": ({}, "_MgCudaStandIn"),
    "event": ({}, "_MgCudaStandIn"),
    "ranks": ({}, "list"),
    "reduce_op": ({"value": "SUM"}, "ReduceOp"),
    "group": ({"value": "world"}, "ProcessGroup"),
    "namespace": ({"fields": [{"name": "h", "kind": "int", "expr": "n"}]}, "_MgNamespace"),
    "optimizer": ({"shape": ["n", "n"], "count": "ws", "dtype": "float32"}, "Optimizer"),
    "param_groups": ({"shape": ["n", "n"], "count": "ws", "dtype": "float32"}, "list"),
    "optim_state": ({}, "_MgOptimState"),
}
MINED = """import enum
import torch
SEEN = []


class Mode(enum.Enum):
    ALL_REDUCE = 1
    REDUCE_SCATTER = 2


def probe(*args):
    SEEN.extend(args)
    return torch.ones(2)
"""
CHILD = """import importlib.util, json, os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=0, world_size=1)
spec = importlib.util.spec_from_file_location("task", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
m.solution(*m.make_inputs(0, 1, seed=0, device="cpu", size="smoke"))
def what(x):
    for t, name in ((torch.Tensor, "Tensor"), (torch.nn.Module, "Module"),
                    (torch.optim.Optimizer, "Optimizer"),
                    (dist.ProcessGroup, "ProcessGroup"), (torch.dtype, "dtype"), (torch.device, "device")):
        if isinstance(x, t):
            return name
    if type(x).__name__ in ("RedOpType", "ReduceOp"):
        return "ReduceOp"
    if callable(x) and type(x).__name__ in ("function", "builtin_function_or_method"):
        return "callable"
    if isinstance(x, os.PathLike):
        return "Path"
    return type(x).__name__
print(json.dumps([what(x) for x in m.SEEN]))
"""


def test_every_schema_kind_is_drawn_by_the_task_runtime(tmp_path):
    assert set(SAMPLES) == set(specs.SCHEMA)
    args = [specs.arg(f"a_{k}", k, **keys) for k, (keys, _) in SAMPLES.items()]
    spec = {"entry": "probe", "kind": "function", "args": args, "attrs": [], "n_attr": 8}
    assert specs.spec_problems(spec) == []
    cand = {
        "id": "kinds",
        "qualname": "probe",
        "provenance": {
            "repo": "example/kinds",
            "commit": "0" * 40,
            "path": "kinds.py",
            "line_start": 1,
            "line_end": 6,
            "license": "MIT",
            "url": "https://example.invalid/kinds.py",
        },
    }
    task = tmp_path / "kinds_task.py"
    task.write_text(task_source(cand, prepare(MINED), spec))
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(task), str(tmp_path / "store")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    want = [w for _, w in SAMPLES.values()]
    for kind, g, w in zip(SAMPLES, got, want):
        assert g == w, (kind, g, w)
        assert g != "NoneType" or kind == "none", kind  # nothing fell through the runtime's table
    assert len(got) == len(want)
