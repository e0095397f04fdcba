"""Checks of timed calls, all outside the timed regions (mgbench.validation.timing's after_region hook).

Design (docs/eval.md, "Timed calls"): the timing of the reference and of the candidate keeps the
baselines' method (events, rotation, barrier, lead); in addition
- every timed output is type-checked (plain torch.Tensor, no mode left active) after its region;
- after each region, every input set the region used is perturbed (two elements of each float
  tensor swapped, the same positions on every rank), and the rotation holds at least as many sets
  as calls per region, so no call ever sees inputs that an earlier call saw: a cache keyed on
  pointers, shapes or sampled values serves a stale answer, which is wrong at the swapped places;
- a random sample of regions (shared secret seed: every rank picks the same) has one random call
  verified against the reference run on the same set, before the set is perturbed.
The reference timed in the same job goes through the same hook, so both sides pay the same.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import torch

from mgbench.validation.checks import tensors_of
from mgbench.validation.compare import ATOL_REL_MAX, Tolerance, compare
from mgbench.validation.eval import rankchecks
from mgbench.validation.eval.guard import left_behind

VERIFY_RATE = 0.25  # share of timed regions with one call verified against the reference
TOL_FACTOR = 2.0  # candidate vs reference: each may be off the oracle by the tolerance


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


@dataclass
class TimedCheck:
    """The after_region hook of one timing job; `reason` is "" or the first rejection."""

    reference: Callable  # the task's solution, run on every rank for verification
    device: torch.device
    tol: Tolerance | None  # None: each dtype's default
    rng: random.Random
    harness: Callable[[], AbstractContextManager]  # context in which harness code calls the task
    rate: float = VERIFY_RATE
    outputs: list[Any] = field(default_factory=list)
    reason: str = ""
    calls: int = 0
    verified: int = 0
    perturbed: int = 0

    def wrap(self, fn: Callable) -> Callable:
        outs = self.outputs

        def timed_call(*args: Any) -> Any:  # keeps every output of a region alive until its hook
            out = fn(*args)
            outs.append(out)
            return out

        return timed_call

    def make_args(self, make: Callable[[int], tuple]) -> Callable[[int], tuple]:
        """Input sets perturbed once when made: a cache filled by an earlier job does not match."""

        def made(i: int) -> tuple:
            with self.harness():
                s = make(i)
                self.perturbed += perturb(s, self.rng)
            return s

        return made

    def after_region(self, idx: list[int], sets: list[tuple]) -> None:
        outs, self.outputs[:] = list(self.outputs[-len(idx) :]), []
        first = self.calls
        self.calls += len(idx)
        left = left_behind()  # cleared before the hook's own tensor operations
        if not self.reason and left:
            self.reason = rankchecks.rule("dispatch_override", f"a timed call left {', '.join(left)} installed")
        if not self.reason:
            self.reason = next(
                (
                    f"timed call {first + j + 1}: {r}"
                    for j, o in enumerate(outs)
                    if (r := rankchecks.plain_outputs(o, self.device))
                ),
                "",
            )
        with self.harness():
            if self.rng.random() < self.rate:
                j = self.rng.randrange(len(idx))
                ref = self.reference(*sets[idx[j]])  # collective: every rank runs it
                self.verified += 1
                if not self.reason and j < len(outs):
                    ok, why = compare(outs[j], ref, self.tol, exact_dtype=True)
                    if not ok:
                        self.reason = rankchecks.rule(
                            "timed_values",
                            f"timed call {first + j + 1}: output differs from the reference "
                            f"run on the same inputs ({why}); a cache, a shortcut taken only when timed, or "
                            "work left unfinished",
                        )
            for i in dict.fromkeys(idx):
                self.perturbed += perturb(sets[i], self.rng)
        del outs

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "verified": self.verified, "perturbed_tensors": self.perturbed}


def widened(tol: Tolerance) -> Tolerance:
    return Tolerance(tol.rtol * TOL_FACTOR, min(tol.atol_rel * TOL_FACTOR, ATOL_REL_MAX))
