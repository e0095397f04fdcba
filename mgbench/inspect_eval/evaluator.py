"""Run `mgbench eval` on one candidate file in a child process, at most N at a time, under Inspect.

The child process, its deadline, the output caps, the GPU slots and the record parsing live in
mgbench.evalchild (shared with the RL reward service, mgbench.rl, and free of inspect_ai); this module
adds Inspect's `concurrency()` as the bound on running evaluations, so the status bar shows it. The
names below are re-exported from there for the Inspect task's modules and older imports.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from inspect_ai.util import concurrency

from mgbench import evalchild
from mgbench.evalchild import (  # noqa: F401  (re-exported)
    VERDICT_KEYS,
    EvalSettings,
    GpuPool,
    HarnessError,
    child_env,
    gpu_ids,
    gpu_pool,
    parse_record,
    run_child,
    verdict,
    visible_gpus,
)

CONCURRENCY_NAME = "mgbench-eval"


def _limit(settings: EvalSettings):
    return lambda: concurrency(CONCURRENCY_NAME, settings.concurrency())


@asynccontextmanager
async def eval_slot(settings: EvalSettings) -> AsyncIterator[dict[str, str]]:
    """Enter the shared evaluation limit; yields the environment the child needs (its GPUs on NCCL)."""
    async with evalchild.eval_slot(settings, _limit(settings)) as env:
        yield env


async def evaluate_file(
    settings: EvalSettings, task_id: str, solution: Path, results: Path | None = None
) -> dict[str, Any]:
    """Evaluate `solution` for `task_id`; the record of `mgbench eval` (appended to `results` by the
    child itself when given, so the line is exactly what `mgbench eval --results` writes)."""
    return await evalchild.evaluate_file(settings, task_id, solution, results, limit=_limit(settings))
