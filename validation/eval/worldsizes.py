"""At which world sizes `mgbench eval` judges a candidate: by default every world size the task
supports that this machine can run, so that a solution right at 2 ranks only is not CORRECT for a
task whose prompt declares 2, 4 and 8.

What a machine can run: NCCL one rank per visible GPU; gloo (CPU ranks) up to the larger of
GLOO_MIN_RANKS and the CPU cores (ranks of small CPU tasks share cores well enough for correctness).
"""

from __future__ import annotations

import os

GLOO_MIN_RANKS = 4  # gloo always runs 2 and 4 ranks, even on a 2-core machine
DEFAULT_WORLD_SIZE = 2  # a task that declares no world sizes


def machine_ranks(backend: str) -> int:
    """The most ranks of `backend` this machine can run at once."""
    if backend == "nccl":
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    # gloo ranks, on CPU or sharing GPUs (shared-gpu): as many as the cores carry
    return max(GLOO_MIN_RANKS, os.cpu_count() or 1)


def judged_world_sizes(task_sizes: list[int], requested: list[int] | None, backend: str) -> list[int]:
    """`requested` as given (the caller checks the task supports them), else the task's world sizes
    this machine can run (the smallest supported one when it can run none)."""
    if requested:
        return sorted(set(requested))
    supported = sorted(set(task_sizes)) or [DEFAULT_WORLD_SIZE]
    fits = [w for w in supported if w <= machine_ranks(backend)]
    return fits or supported[:1]
