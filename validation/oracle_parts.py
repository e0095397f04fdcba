"""Oracles run in parts along an axis they are independent over, so that one float64 oracle too big for
one GPU still runs on it.

The attention families' oracles build the unsharded (heads, seq, seq) float64 score matrix: 64 GiB at
full size, and about 128 GiB at the oracle's peak (the scaled copy, the softmax). No H100 holds that, and
an H200 holds it only with little else on the device. Attention is independent per head, so the oracle
run on the inputs of a few heads at a time gives the same rows, and the whole output is those parts put
back together. The task's own `oracle` computes every part (no task text changes, so no content hash
moves); this table only says how its inputs split and how its outputs join.

A family is added with one entry in SPLITS: for each input of a rank, the axis its heads are on (None:
every part gets it whole), and for each output, the axis the parts are joined on, or SUM where the output
is a sum over heads (an output projection). tests/test_oracle_parts.py checks every entry against the
whole oracle at smoke size. On a GPU (SPLIT_ON_DEVICES), validation/checks.py and the eval judge's reference
ranks run an entry's oracle in parts; on the CPU it runs whole, as the published tolerances were calibrated."""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

# Device types on which validation runs an entry's oracle in parts: where memory is short. On the CPU the
# oracle runs whole, as when the published tolerances were calibrated.
SPLIT_ON_DEVICES = {"cuda"}
SUM = "sum"  # an output that is the sum of the parts' outputs (a projection that mixes heads)
MAX_PARTS = 8  # enough to bring a 128 GiB peak to 16 GiB; more parts only add calls


@dataclass(frozen=True)
class Split:
    """How one family's oracle splits over attention heads."""

    inputs: tuple[int | None, ...]  # per input of a rank: the head axis, or None (whole to every part)
    outputs: tuple[int | str, ...]  # per output of a rank (one entry: a single tensor): join axis, or SUM


# Task-id globs -> how their oracle splits. Heads: q (b, s, heads, d), k and v (b, s, kv_heads, d), an
# attention output (b, s, heads, d), a log-sum-exp (b, heads, s); the Ulysses layer's w_qkv
# (hidden, 3, heads, d) and w_o (heads, d, hidden), whose output sums over heads.
SPLITS: dict[str, Split] = {
    "l2-ring_attention-*": Split(inputs=(2, 2, 2), outputs=(2, 1)),
    "l2-ulysses_sdpa-*": Split(inputs=(2, 2, 2), outputs=(2,)),
    "l2-kv_allgather_attention-*": Split(inputs=(2, 2, 2), outputs=(2,)),
    "l3-ulysses_attention-*": Split(inputs=(None, 2, 0), outputs=(SUM,)),
}


def split_for(task_id: str) -> Split | None:
    """The entry whose glob matches `task_id`, or None."""
    return next((s for pattern, s in SPLITS.items() if fnmatch.fnmatchcase(task_id, pattern)), None)


def split_here(task_id: str, device: torch.device) -> Split | None:
    """The entry validation and the eval judge use for `task_id` on `device`: None where the oracle runs whole."""
    return split_for(task_id) if device.type in SPLIT_ON_DEVICES else None


def solve(
    oracle: Callable[[list, int], list], inputs_per_rank: Sequence[tuple], world_size: int, split: Split | None
) -> list:
    """The oracle's per-rank outputs: in as many parts as `split` allows (parts_for), or whole without one."""
    if split is None:
        return oracle(inputs_per_rank, world_size)
    return solve_in_parts(oracle, inputs_per_rank, world_size, split, parts_for(inputs_per_rank, split))


def parts_for(inputs_per_rank: Sequence[tuple], split: Split, cap: int = MAX_PARTS) -> int:
    """The number of parts: the largest count up to `cap` that divides every split axis's length."""
    lengths = [t.shape[a] for inp in inputs_per_rank for t, a in zip(inp, split.inputs) if a is not None]
    common = math.gcd(*lengths) if lengths else 1
    return max(n for n in range(1, cap + 1) if common % n == 0)


def solve_in_parts(
    oracle: Callable[[list, int], list], inputs_per_rank: Sequence[tuple], world_size: int, split: Split, parts: int
) -> list:
    """`oracle(inputs_per_rank, world_size)` computed `parts` head groups at a time and joined: per rank,
    a tuple of outputs (or one tensor, as the oracle returns it). `parts` must divide every split axis."""
    if len(inputs_per_rank[0]) != len(split.inputs):
        raise ValueError(f"the split names {len(split.inputs)} inputs, a rank has {len(inputs_per_rank[0])}")
    for inp in inputs_per_rank:
        for t, a in zip(inp, split.inputs):
            if a is not None and t.shape[a] % parts:
                raise ValueError(f"{parts} parts do not divide axis {a} of an input of shape {tuple(t.shape)}")
    # per rank, per output: the pieces to concatenate, or the running sum (one part's output held at a time)
    joined: list[list[Any]] | None = None
    single = False
    for i in range(parts):
        part_inputs = [
            tuple(t if a is None else t.chunk(parts, dim=a)[i] for t, a in zip(inp, split.inputs))
            for inp in inputs_per_rank
        ]
        result = oracle(part_inputs, world_size)
        if joined is None:
            single = isinstance(result[0], torch.Tensor)
            joined = [[None if how == SUM else [] for how in split.outputs] for _ in result]
        for r, out in enumerate(result):
            outs = (out,) if single else tuple(out)
            if len(outs) != len(split.outputs):
                raise ValueError(f"the split names {len(split.outputs)} outputs, the oracle gave {len(outs)}")
            for j, (how, piece) in enumerate(zip(split.outputs, outs)):
                if how != SUM:
                    joined[r][j].append(piece)
                elif joined[r][j] is None:
                    joined[r][j] = piece.clone()
                else:
                    joined[r][j] += piece
    assert joined is not None
    per_rank = []
    for slots in joined:
        outs = tuple(s if how == SUM else torch.cat(s, dim=int(how)) for s, how in zip(slots, split.outputs))
        per_rank.append(outs[0] if single else outs)
    return per_rank
