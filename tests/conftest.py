"""Shared fixtures: a generated task set of the core level-1/2 families and helpers for planted tasks."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

# The eval backend of the adversarial suites (test_eval_cheats, test_eval_judge_separation): gloo here and
# in CI; `MGBENCH_TEST_EVAL_BACKEND=shared-gpu` judges the same candidates with every rank's tensors on
# one GPU (docs/shared-gpu.md), and lets the CUDA-only cheats run on a one-GPU machine.
EVAL_BACKEND = os.environ.get("MGBENCH_TEST_EVAL_BACKEND", "gloo")

CORE_FAMILIES = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "all_to_all_v",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "ring_shift",
    "ag_gemm",
    "gemm_rs",
    "gemm_ar",
    "vocab_embedding",
]


@pytest.fixture(scope="session")
def core_tasks(tmp_path_factory) -> Path:
    """OUT folder with the level-1/2 core families generated."""
    from mgbench.generator import generate

    out = tmp_path_factory.mktemp("core")
    generate(out, families=CORE_FAMILIES)
    return out


def write_planted(out: Path, tasks: dict[str, str], level: int = 1) -> Path:
    """A manifest + modules for hand-written task sources {task_id: source}."""
    (out / "tasks").mkdir(parents=True, exist_ok=True)
    lines = []
    for tid, src in tasks.items():
        (out / "tasks" / f"{tid}.py").write_text(src)
        lines.append(
            json.dumps(
                {
                    "task_id": tid,
                    "module": f"tasks/{tid}.py",
                    "level": level,
                    "family": tid,
                    "dtype": "float32",
                    "world_sizes": [2, 4],
                    "content_hash": hashlib.sha256(src.encode()).hexdigest(),
                }
            )
        )
    (out / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    return out


PLANTED_HEADER = """
import torch
import torch.distributed as dist
SIZES = {"smoke": {"n": 64}, "full": {"n": 64}}
def make_inputs(rank, world_size, *, seed, device, size="full"):
    g = torch.Generator().manual_seed(seed * 100 + rank)
    return (torch.randn(SIZES[size]["n"], generator=g).to(device),)
def oracle(inputs_per_rank, world_size):
    s = sum(i[0].double() for i in inputs_per_rank)
    return [s.clone() for _ in range(world_size)]
"""

GOOD_SOLUTION = """
def solution(x):
    y = x.clone()
    dist.all_reduce(y)
    return y
"""


@pytest.fixture
def one_rank(tmp_path):
    """A one-rank gloo default process group for the test's duration."""
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    yield
    dist.destroy_process_group()
