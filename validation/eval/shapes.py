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
- at full, from half to once its published value v: a held-out call never needs more memory than the
  timed one;
- at smoke, from half to SMOKE_SPAN (8) times v, and the shape as a whole is bounded: the product over the
  varied parameters of value / v is at most SIZE_CAP (8) (v is the parameter's smallest value instead
  when a step lifts that above v), so no tensor indexed by the moved sizes grows more than 8-fold (work
  quadratic in one size, as attention's in the sequence, at most 64-fold a smoke call's). The
  wide range is what makes the shape unguessable: when the smoke value is its own granule, as for
  power-of-two sizes (n smoke 4096, full 2**25: granule 4096), half to twice v left v and 2v, so the
  "never printed" shape was always n = 2v and a solution hard-coded for two sizes passed; now n is one
  of 2v, 3v, ..., 8v, and with several parameters the shape is one of many combinations;
- it keeps the order and divisibility relations that both published classes show between two integer
  sizes (a < b, a <= b, a | b: a minimum below a maximum, a rank below a matrix side, kv heads dividing
  heads), which a template may rely on: without them the wide range broke the reference of four
  families at their first draw (kv_transfer_paged, powersgd, gdn_ulysses, varlen_ring_attention). Sizes
  equal in every class are tied, which the family's rule handles; a parameter the relations with the
  sizes that do not vary leave no value keeps its published one;
- never the published shape itself when another exists.

`draw` searches depth first over the varied parameters in an order shuffled by its rng (a divisor before
its multiples), each taking its values that keep the relations with those already drawn and the cap
(those still to come at their smallest) in random order: it is deterministic for a given rng, ends (at
most MAX_NODES partial shapes) and, where no relation dead-ends, gives the first parameter a uniform value.
The judge draws one such shape per evaluation with randomness the candidate never sees and records it
in the result; a maintainer can pin a private set instead (`mgbench eval --shapes FILE`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

HELDOUT_SIZE = "heldout"  # the size-class name the reference ranks register a drawn shape under
SMOKE_SPAN = 8  # at smoke a parameter goes up to SMOKE_SPAN times its published value
SIZE_CAP = 8  # ... and the product of value / base over the varied parameters stays within this
BRANCH = 32  # values of one parameter `draw` tries in uniform random order before going through the rest
MAX_NODES = 20000  # partial shapes `draw` tries before it gives up


@dataclass(frozen=True)
class ShapeSpace:
    """The integer parameters a size class may vary: name -> (granule, lowest, highest) value; the relations
    (a, op, b), op one of <, <=, |, that every shape keeps; the cap on the product of value / base over the
    varied parameters (base: the published value, or the parameter's smallest value when that is above)."""

    published: dict[str, Any]
    ranges: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    relations: tuple[tuple[str, str, str], ...] = ()
    cap: int = SIZE_CAP

    def _still(self) -> dict[str, Any]:
        return {k: v for k, v in self.published.items() if k not in self.ranges}

    def choices(self, name: str) -> list[int]:
        """The values of a varied parameter: multiples of its granule within its range that keep the
        relations with the parameters that do not vary."""
        return _values(self, name, self._still()).all()

    def bases(self) -> dict[str, int]:
        """What the cap measures each varied parameter against."""
        still = self._still()
        return {n: max(self.published[n], _values(self, n, still).first()) for n in self.ranges}

    def size(self, shape: dict[str, Any]) -> Fraction:
        """The product of value / base over the varied parameters: at most `cap` for a shape of the space."""
        return math.prod((Fraction(shape[n], b) for n, b in self.bases().items()), start=Fraction(1))

    def keeps(self, shape: dict[str, Any]) -> bool:
        """Whether a (partial) shape keeps every relation; a parameter it lacks or holds as None keeps all."""
        return all(_holds(shape.get(a), op, shape.get(b)) for a, op, b in self.relations)

    @property
    def fixed(self) -> bool:
        """Whether the space has no shape other than the published one (as far as `draw` searches)."""
        still = self._still()
        if not any(_values(self, n, still).count() > 1 for n in self.ranges):
            return True
        return _search(self, random.Random(0)) is None


@dataclass(frozen=True)
class _Values:
    """The multiples of `step` within [lo, hi] that divide `divides` (when given)."""

    step: int
    lo: int
    hi: int
    divides: int | None = None

    def _small(self) -> list[int] | None:  # the values, when they are among a number's divisors
        if self.divides is None:
            return None
        return [d for d in _divisors(self.divides) if self.lo <= d <= self.hi and d % self.step == 0]

    def _ks(self) -> range:
        return range(max(1, -(-self.lo // self.step)), self.hi // self.step + 1)

    def count(self) -> int:
        small = self._small()
        return len(small) if small is not None else len(self._ks())

    def first(self) -> int:
        small = self._small()
        return small[0] if small is not None else self._ks()[0] * self.step

    def all(self) -> list[int]:
        small = self._small()
        return small if small is not None else [k * self.step for k in self._ks()]

    def shuffled(self, rng: random.Random) -> Iterator[int]:
        """The values in random order, lazily: BRANCH of them uniformly (the first one uniform), then the
        rest from a random offset on."""
        small = self._small()
        if small is not None:
            yield from rng.sample(small, len(small))
            return
        ks = self._ks()
        tried = rng.sample(ks, min(BRANCH, len(ks)))
        yield from (k * self.step for k in tried)
        if len(ks) > len(tried):
            seen, start = set(tried), rng.randrange(len(ks))
            rest = (ks[i % len(ks)] for i in range(start, start + len(ks)))
            yield from (k * self.step for k in rest if k not in seen)


@lru_cache(maxsize=4096)
def _divisors(n: int) -> tuple[int, ...]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return tuple(sorted(set(small) | {n // d for d in small}))


def _values(space: ShapeSpace, name: str, shape: dict[str, Any], top: Fraction | None = None) -> _Values:
    """The values of varied parameter `name` that keep the relations with the parameters `shape` holds (as
    ints) and are at most `top`."""
    step, lo, hi = space.ranges[name]
    divides = None
    if top is not None:
        hi = min(hi, math.floor(top))
    for a, op, b in space.relations:
        if name not in (a, b) or a == b:
            continue
        other = shape.get(b if a == name else a)
        if other is None:
            continue
        if op == "|" and a == name:
            divides = other if divides is None else math.gcd(divides, other)
        elif op == "|":
            step = math.lcm(step, other)
        elif a == name:
            hi = min(hi, other - 1 if op == "<" else other)
        else:
            lo = max(lo, other + 1 if op == "<" else other)
    return _Values(step, lo, hi, divides)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _holds(a: Any, op: str, b: Any) -> bool:
    """Whether `a op b` holds; a parameter not yet drawn (None) keeps every relation."""
    if a is None or b is None:
        return True
    return a < b if op == "<" else a <= b if op == "<=" else b % a == 0


def _relations(sizes: dict[str, dict[str, Any]], varied: set[str]) -> tuple[tuple[str, str, str], ...]:
    """The order and divisibility relations between two integer sizes, one of them varied, that every
    published class shows: a < b in each; a <= b in each (equal in some, not all); a | b in each (a >= 2 and
    below b in some). Sizes equal in every class are tied, which the family's rule handles (`fixed`)."""
    classes = list(sizes.values())
    names = [n for n in classes[0] if all(_is_int(c.get(n)) and c.get(n) >= 1 for c in classes)]
    out = []
    for a in names:
        for b in names:
            if a == b or not ({a, b} & varied):
                continue
            pairs = [(c[a], c[b]) for c in classes]
            if all(x < y for x, y in pairs):
                out.append((a, "<", b))
            elif all(x <= y for x, y in pairs) and any(x < y for x, y in pairs):
                out.append((a, "<=", b))
            if all(y % x == 0 for x, y in pairs) and any(1 < x < y for x, y in pairs):
                out.append((a, "|", b))
    return tuple(out)


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
        hi = v if size != "smoke" else SMOKE_SPAN * v
        if g <= hi:  # else no multiple of a step fits: the parameter keeps its published value
            ranges[name] = (g, max(g, v // 2), hi)
    while True:  # a parameter the relations leave no value keeps its published one
        space = ShapeSpace(dict(published), ranges, _relations(sizes, set(ranges)))
        still = space._still()
        empty = [n for n in ranges if not _values(space, n, still).count()]
        if not empty:
            return space
        ranges = {n: r for n, r in ranges.items() if n not in empty}


def _depth(space: ShapeSpace, name: str) -> int:
    """How many varied parameters a chain of divisibility relations puts below `name` (acyclic: a | b in
    every class with a < b in some)."""
    below = [a for a, op, b in space.relations if op == "|" and b == name and a in space.ranges]
    return max((1 + _depth(space, a) for a in below), default=0)


def draw(space: ShapeSpace, rng: random.Random) -> dict[str, Any] | None:
    """A shape of the space other than the published one (None when the space has no other)."""
    return None if space.fixed else _search(space, rng)


def _search(space: ShapeSpace, rng: random.Random) -> dict[str, Any] | None:
    """The first complete shape other than the published one of a depth-first search (module docstring),
    None when there is none or after MAX_NODES partial shapes."""
    names = sorted(space.ranges)
    rng.shuffle(names)
    names.sort(key=lambda n: _depth(space, n))  # a divisor before its multiples: a multiple never dead-ends
    bases = space.bases()
    still = space._still()
    lowest = {n: Fraction(_values(space, n, still).first(), bases[n]) for n in names}  # each at most 1
    nodes = 0

    def fill(shape: dict[str, Any], depth: int, room: Fraction) -> dict[str, Any] | None:
        # room: how far the product may still go above the smallest completion of `shape`
        nonlocal nodes
        nodes += 1
        if depth == len(names):
            return shape if shape != space.published else None
        name = names[depth]
        for c in _values(space, name, shape, room * lowest[name] * bases[name]).shuffled(rng):
            if nodes >= MAX_NODES:
                return None
            found = fill({**shape, name: c}, depth + 1, room * lowest[name] / Fraction(c, bases[name]))
            if found is not None:
                return found
        return None

    start = {k: (None if k in space.ranges else v) for k, v in space.published.items()}
    return fill(start, 0, Fraction(space.cap) / math.prod(lowest.values(), start=Fraction(1)))


def describe(shape: dict[str, Any], published: dict[str, Any]) -> str:
    """The parameters of a held-out shape that differ from the published one, e.g. `m=96 (published 128)`."""
    moved = [f"{k}={v} (published {published[k]})" for k, v in shape.items() if published.get(k) != v]
    return ", ".join(moved) or "the published shape"
