"""Records of the taxonomy: dims, workloads, realizations, families and their variants."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WILDCARD = "*"  # a composition rule's "any other dim"
# The suite every family belongs to unless it says otherwise: the benchmark as published. Any other suite is a
# peer id (taxonomy/peers/<id>.yaml): a layer of families that reproduce that peer's problems in its own form,
# rendered only when asked for (`generate --suite <peer>`), so the core task set and its GPU records stay put.
CORE_SUITE = "core"


class TaxonomyError(ValueError):
    """A malformed taxonomy file or entry; the message names file, entry and reason on one line."""


@dataclass(frozen=True)
class Dim:
    id: str
    name: str
    min_size: int = 1
    max_size: int | None = None
    power_of_two: bool = False

    def admits(self, size: int) -> str | None:
        """Return why a mesh axis of `size` is not allowed for this dim, or None."""
        if size < self.min_size:
            return f"dim {self.id} needs mesh size >= {self.min_size}, got {size}"
        if self.max_size is not None and size > self.max_size:
            return f"dim {self.id} allows mesh size <= {self.max_size}, got {size}"
        if self.power_of_two and size & (size - 1):
            return f"dim {self.id} needs a power-of-two mesh size, got {size}"
        return None


@dataclass(frozen=True)
class Workload:
    id: str
    name: str


@dataclass(frozen=True)
class Realization:
    id: str
    name: str


@dataclass(frozen=True)
class Tradeoff:
    """A trade-off a fast solution must get right (taxonomy/tradeoffs.yaml): an id of the closed
    vocabulary, a short name and a one-line meaning."""

    id: str
    name: str
    meaning: str = ""


@dataclass(frozen=True)
class PlanAxis:
    """One axis of a parallelism plan: a dim and its mesh size (an int, or "world"/"rest")."""

    dim: str
    size: int | str = "world"

    def resolve(self, world_size: int, fixed_product: int) -> int:
        if isinstance(self.size, int):
            return self.size
        return world_size // fixed_product if self.size == "rest" else world_size


@dataclass(frozen=True)
class Variant:
    """One variant of a family: template params (and size overrides), plus metadata that is not
    rendered into its own params: the peer problems it claims to match and a sentence appended to
    the family description for its tasks."""

    id: str
    params: dict[str, Any] = field(default_factory=dict)
    peers: dict[str, list[int]] = field(default_factory=dict)
    description: str = ""
    suite: str = ""  # "" = the family's suite


@dataclass(frozen=True)
class Peer:
    """A peer benchmark whose problems families claim to match (taxonomy/peers/<id>.yaml)."""

    id: str
    name: str
    source: str
    problems: dict[int, str]  # problem number -> name
    audited: str = ""  # when and how the claims were last audited (the peer file's `audited`)
    audit: dict[int, PeerAudit] = field(default_factory=dict)  # problem number -> the audit's verdict


AUDIT_VERDICTS = ("full", "partial", "none")


@dataclass(frozen=True)
class PeerAudit:
    """An independent audit's verdict on one peer problem: full (same function, collectives, sharding and
    kinds of inputs), partial or none, with what differs (in our words)."""

    verdict: str
    differs: str = ""


@dataclass
class Family:
    """A task family: workload x plan x realization, rendered by one template."""

    id: str
    level: int
    template: str
    workload: str
    plan: list[PlanAxis]
    realization: list[str]
    dtypes: list[str]
    world_sizes: list[int]
    sizes: dict[str, dict[str, Any]]
    variants: list[Variant]
    scales: dict[str, dict[str, dict[str, Any]]]
    divisible: dict[str, str | int]
    description: str
    source_file: str
    params: dict[str, Any] = field(default_factory=dict)
    forbid_collectives: bool = False
    layout: list[PlanAxis] = field(default_factory=list)  # separate mesh axes, outer -> inner
    peers: dict[str, list[int]] = field(default_factory=dict)  # peer id -> problems every variant matches
    models: list[dict[str, str]] = field(default_factory=list)  # production code modelled: {project, file}
    # held-out shapes: {fixed: [size params that never move], step: {size param: coarser step}}
    shapes: dict[str, Any] = field(default_factory=dict)
    tradeoffs: list[str] = field(default_factory=list)  # ids of taxonomy/tradeoffs.yaml a fast solution must get right
    suite: str = CORE_SUITE  # CORE_SUITE, or the peer id whose problems this family reproduces in the peer's form

    def suite_of(self, variant: Variant) -> str:
        """The suite a variant's tasks belong to: its own, else the family's."""
        return variant.suite or self.suite

    @property
    def dims(self) -> list[str]:
        return [a.dim for a in self.plan] or ["collective"]

    def mesh(self, world_size: int) -> dict[str, int]:
        """Mesh size per dim of the plan at `world_size` (ordered as the plan)."""
        fixed = 1
        for a in self.plan:
            if isinstance(a.size, int):
                fixed *= a.size
        return {a.dim: a.resolve(world_size, fixed) for a in self.plan}


@dataclass
class Taxonomy:
    dims: dict[str, Dim]
    workloads: dict[str, Workload]
    realizations: dict[str, Realization]
    families: dict[str, Family]
    compositions: Compositions | None = None
    peers: dict[str, Peer] = field(default_factory=dict)
    tradeoffs: dict[str, Tradeoff] = field(default_factory=dict)
    tradeoff_defaults: dict[str, list[str]] = field(default_factory=dict)  # realization -> tags (level 4)

    def mined_tradeoffs(self, families: list[str], realizations: list[str]) -> list[str]:
        """The trade-offs of a level-4 mined task: those of the first matched family the taxonomy
        has, else the union (in vocabulary order) of the realizations' defaults; [] when neither."""
        fam = next((self.families[f] for f in families if f in self.families), None)
        if fam is not None:
            return list(fam.tradeoffs)
        tags = {t for r in realizations for t in self.tradeoff_defaults.get(r, [])}
        return [t for t in self.tradeoffs if t in tags]


@dataclass(frozen=True)
class Composition:
    """The rule for one pair of dims ("*" = any other dim)."""

    dims: tuple[str, str]
    layout: tuple[str, str] | None = None  # (outer, inner) when the dims may take separate axes
    share: bool = False  # the dims may be tagged on one shared axis
    reason: str = ""

    @property
    def forbidden(self) -> bool:
        return self.layout is None and not self.share


@dataclass
class Compositions:
    """All pair rules, looked up exactly first and then through a wildcard entry."""

    rules: dict[frozenset[str], Composition]

    def rule(self, a: str, b: str) -> Composition | None:
        for key in (frozenset((a, b)), frozenset((a, WILDCARD)), frozenset((b, WILDCARD))):
            if key in self.rules:
                return self.rules[key]
        return None

    def pairs(self) -> list[Composition]:
        return sorted(self.rules.values(), key=lambda c: c.dims)
