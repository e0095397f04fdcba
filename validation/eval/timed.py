"""The decoy of a timed batch: an earlier call's inputs with two elements of every float tensor swapped.

The judge (validation/eval/judge/clock.py) puts one decoy in every timed batch: a cache keyed on
pointers, shapes, sampled values or a partial hash of the inputs serves the earlier call's answer,
which is wrong at the swapped places and is caught when the judge verifies the decoy's outputs.

The swap is alike only where the inputs are alike. Each tensor's positions come from the decoy seed
(shared by every rank) and the tensor's owner: the lowest rank whose tensor at the same place of its
input set is bitwise equal (`owners`). A tensor the task replicates (weights of data-parallel ranks)
has one owner on every rank, so it gets the same swap everywhere and stays replicated: an honest
candidate that relies on the replication still agrees with the reference. A tensor that differs per
rank gets a swap of its own on each rank, so the decoy's answer depends on the other ranks' swaps:
a rank cannot derive it from an earlier answer by itself (for all_reduce, swapping the same two
output elements would be right if every rank had swapped the same two places).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import torch

from mgbench.validation.checks import tensors_of


def _float_flat(t: torch.Tensor) -> torch.Tensor | None:
    if not (t.is_floating_point() or t.is_complex()) or t.numel() < 2 or not t.is_contiguous():
        return None
    return t.view(-1)


def _bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same shape, dtype, device and bytes: a replicated copy (NaNs equal, unlike torch.equal and
    checks.same_tensor). `a` is a tensor perturb changes (dense, contiguous); a `b` of another layout
    is not a copy of it."""
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device or b.layout != torch.strided:
        return False
    return torch.equal(a.detach().view(-1).view(torch.uint8), b.detach().contiguous().view(-1).view(torch.uint8))


def owners(inputs: Any, rank: int, inputs_of: Callable[[int], Any]) -> list[int]:
    """For each tensor of `inputs` (rank `rank`'s set, tensors_of order), the lowest rank r' <= rank
    whose set (`inputs_of(r')`, drawn one rank at a time and dropped before the next) holds an equal
    tensor at the same place. Only tensors that `perturb` changes are compared; the rest keep `rank`.
    Rank 0 draws nothing."""
    mine = tensors_of(inputs)
    out = [rank] * len(mine)
    todo = [i for i, t in enumerate(mine) if _float_flat(t) is not None]
    for r in range(rank):
        if not todo:
            break
        theirs = tensors_of(inputs_of(r))
        todo_next = []
        for i in todo:
            if i < len(theirs) and _bitwise_equal(mine[i], theirs[i]):
                out[i] = r
            else:
                todo_next.append(i)
        todo = todo_next
        del theirs
    return out


def perturb(inputs: Any, rng: random.Random, owners: Sequence[int] | None = None) -> int:
    """Swap two elements of every float tensor of `inputs`; returns how many tensors changed. One
    batch of foreach copies, no sync.

    The positions of each tensor come from `rng` (which every rank seeds alike; one draw per tensor so
    ranks stay in step) mixed with the tensor's owner (`owners`, aligned with tensors_of(inputs); see
    the module docstring): equal tensors with equal owners are swapped alike on every rank, tensors
    that differ per rank are swapped at their own places. Without `owners`, every tensor is swapped
    alike on every rank."""
    seen: set[int] = set()
    a_views, b_views = [], []
    for i, t in enumerate(tensors_of(inputs)):
        r = rng.getrandbits(64)  # drawn for every tensor so all ranks stay in step
        flat = _float_flat(t)
        if flat is None or t.data_ptr() in seen:
            continue
        seen.add(t.data_ptr())
        if owners is not None:  # a str seed: deterministic (sha512), no hash randomization
            r = random.Random(f"{r}:{owners[i]}").getrandbits(64)
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
