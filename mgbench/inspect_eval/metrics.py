"""Inspect metrics of mgbench scores: rates per key (pass, fast_p) and the geometric-mean speedup,
for all tasks, per level and per parallelism dimension (the groups of `mgbench score`).

Each score's value is {"pass": 0/1, "fast_1": 0/1, "fast_1.5": 0/1, "fast_2": 0/1}. Inspect reduces a
task's epochs first: with the `mean` reducer a task's value is c/n (so the rate is pass@1), with
`pass_at_k` it is the unbiased pass@k of Chen et al. (the estimator `mgbench score` uses), and the
rates average over tasks, as `mgbench score` does. The speedup needs every epoch's sample, so that
metric reads the unreduced scores.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from inspect_ai.scorer import Metric, SampleScore, metric

from mgbench.validation.eval import metrics as mg

FAST_PS = (1.0, 1.5, 2.0)
RATE_KEYS = ("pass",) + tuple(f"fast_{p:g}" for p in FAST_PS)


def groups_of(meta: dict[str, Any] | None) -> list[str]:
    """ "all", "level N" and "dim X" for each dimension (a task counts in each of its dims)."""
    meta = meta or {}
    return ["all", f"level {meta.get('level', '?')}"] + [f"dim {d}" for d in (meta.get("dims") or ["?"])]


def _meta(s: SampleScore) -> dict[str, Any]:
    return {**(s.sample_metadata or {}), **(s.score.metadata or {})}


def _name(group: str, key: str) -> str:
    return key if group == "all" else f"{group}/{key}"


def _ordered(groups: Iterable[str]) -> list[str]:
    return sorted(set(groups), key=lambda g: (g != "all", not g.startswith("level"), g))


@metric
def rates() -> Metric:
    """Mean over tasks of each rate key, overall ("pass", "fast_1", ...) and per group
    ("level 2/pass", "dim tensor/fast_1.5", ...)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        values: dict[str, list[float]] = {}
        for s in scores:
            value = s.score.value if isinstance(s.score.value, dict) else {}
            for g in groups_of(_meta(s)):
                for key in RATE_KEYS:
                    if value.get(key) is not None:
                        values.setdefault(_name(g, key), []).append(float(value[key]))
        names = [_name(g, k) for g in _ordered(g for s in scores for g in groups_of(_meta(s))) for k in RATE_KEYS]
        return {n: sum(values[n]) / len(values[n]) for n in names if values.get(n)}

    return compute


@metric(scores="unreduced")
def speedup() -> Metric:
    """Geometric-mean speedup over the reference of the correct samples (every epoch), overall
    ("geomean_speedup") and per group; groups without a timed correct sample are left out."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        per: dict[str, list[float]] = {}
        for s in scores:
            m = _meta(s)
            samples = mg.correct_speedups([mg.Sample(bool(m.get("correct")), m.get("speedup"))])
            for g in groups_of(m):
                per.setdefault(g, []).extend(samples)
        return {_name(g, "geomean_speedup"): mg.geomean(per[g]) for g in _ordered(per) if per[g]}

    return compute
