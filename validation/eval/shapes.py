"""Held-out shapes: sizes of a task that no prompt prints, drawn fresh at each evaluation.

A task publishes its size classes (`SIZES`: smoke, full); a solution must be right at any shape of the
task's shape space, not only at the published ones (ARCHITECTURE: task-module contract). The shape space
of a size class is derived from the two published classes, so no template changes:

- every integer size parameter varies unless the family pins it (taxonomy `shapes: {fixed: [...]}`:
  parameters tied to others, such as a hidden size equal to heads x head dim);
- it takes multiples of its granule, the greatest common divisor of its smoke and full values (both are
  valid at every world size the task supports, so whatever divisibility the template needs, by a mesh
  axis or a tile, divides the granule too), times the family's `shapes: {step: {name: k}}` when given
  (a parameter none of whose multiples fits the range below keeps its published value);
- within half to once the published value at full (a held-out call never needs more memory than the
  timed one), half to twice at smoke; never the published value itself when another exists.

The judge draws one such shape per evaluation with randomness the candidate never sees and records it in
the result; a maintainer can pin a private set instead (`mgbench eval --shapes FILE`).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

HELDOUT_SIZE = "heldout"  # the size-class name the reference ranks register a drawn shape under


@dataclass(frozen=True)
class ShapeSpace:
    """The integer parameters a size class may vary: name -> (granule, lowest, highest) value."""

    published: dict[str, Any]
    ranges: dict[str, tuple[int, int, int]] = field(default_factory=dict)

    def choices(self, name: str) -> list[int]:
        g, lo, hi = self.ranges[name]
        return [k * g for k in range(max(1, -(-lo // g)), hi // g + 1)]

    @property
    def fixed(self) -> bool:
        """Whether no parameter can take a value other than the published one."""
        return not any(len(self.choices(n)) > 1 for n in self.ranges)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def space_of(sizes: dict[str, dict[str, Any]], size: str, rule: dict[str, Any] | None = None) -> ShapeSpace:
    """The shape space of size class `size` of a task whose published classes are `sizes`, under the
    family's `shapes` rule ({fixed: [names], step: {name: k}})."""
    rule = rule or {}
    published = sizes[size]
    fixed = set(rule.get("fixed") or ())
    step = rule.get("step") or {}
    ranges = {}
    for name, v in published.items():
        values = [c.get(name) for c in sizes.values()]
        if name in fixed or not all(_is_int(x) and x >= 1 for x in values) or v < 2:
            continue
        g = math.gcd(*values)
        g = g * int(step.get(name, 1)) // math.gcd(g, int(step.get(name, 1)))
        hi = v if size != "smoke" else 2 * v
        if g <= hi:  # else no multiple of a step fits: the parameter keeps its published value
            ranges[name] = (g, max(g, v // 2), hi)
    return ShapeSpace(dict(published), ranges)


def draw(space: ShapeSpace, rng: random.Random) -> dict[str, Any] | None:
    """A shape of the space other than the published one (None when the space has no other)."""
    if space.fixed:
        return None
    while True:
        shape = dict(space.published)
        for name in sorted(space.ranges):
            shape[name] = rng.choice(space.choices(name))
        if shape != space.published:
            return shape


def describe(shape: dict[str, Any], published: dict[str, Any]) -> str:
    """The parameters of a held-out shape that differ from the published one, e.g. `m=96 (published 128)`."""
    moved = [f"{k}={v} (published {published[k]})" for k, v in shape.items() if published.get(k) != v]
    return ", ".join(moved) or "the published shape"
