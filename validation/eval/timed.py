"""The decoy of a timed batch: an earlier call's inputs with two elements of every float tensor swapped.

The judge (validation/eval/judge/clock.py) puts one decoy in every timed batch: a cache keyed on
pointers, shapes, sampled values or a partial hash of the inputs serves the earlier call's answer,
which is wrong at the swapped places and is caught when the judge verifies the decoy's outputs.
"""

from __future__ import annotations

import random
from typing import Any

import torch

from mgbench.validation.checks import tensors_of


def _float_flat(t: torch.Tensor) -> torch.Tensor | None:
    if not (t.is_floating_point() or t.is_complex()) or t.numel() < 2 or not t.is_contiguous():
        return None
    return t.view(-1)


def perturb(inputs: Any, rng: random.Random) -> int:
    """Swap two elements of every float tensor of `inputs` (positions from `rng`, which every rank
    draws alike); returns how many tensors changed. One batch of foreach copies, no sync."""
    seen: set[int] = set()
    a_views, b_views = [], []
    for t in tensors_of(inputs):
        r = rng.getrandbits(64)  # drawn for every tensor so all ranks stay in step
        flat = _float_flat(t)
        if flat is None or t.data_ptr() in seen:
            continue
        seen.add(t.data_ptr())
        n = flat.numel()
        a = r % n
        b = (a + 1 + (r >> 32) % (n - 1)) % n
        a_views.append(flat[a : a + 1])
        b_views.append(flat[b : b + 1])
    if a_views:
        with torch.no_grad():
            tmp = [v.clone() for v in a_views]
            torch._foreach_copy_(a_views, b_views)
            torch._foreach_copy_(b_views, tmp)
    return len(a_views)
