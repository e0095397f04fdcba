"""Inspect metrics of mgbench scores: rates per key (pass, fast_p) and the geometric-mean speedup,
for all tasks, per level, per parallelism dimension and per trade-off (the groups of `mgbench score`).

Each score's value is {"pass": 0/1, "fast_1": 0/1, "fast_1.5": 0/1, "fast_2": 0/1, "timed": 0/1,
"sol": S or NaN}, counted by the one scoring rule (mgbench.validation.eval.verdict). A group's fast_p is
reported only where some sample's speed counts ("timed"), as in `mgbench score`; an undefined SOL score
is NaN, which the reducers skip. Inspect reduces a task's epochs first: with the `mean` reducer a
task's value is c/n (so the rate is pass@1), with `pass_at_k` it is the unbiased pass@k of Chen et
al. (the estimator `mgbench score` uses), and the rates average over tasks, as `mgbench score` does.
Read "sol" under the `mean` reducer (pass_at_k thresholds it). The speedup needs every epoch's
sample, so that metric reads the unreduced scores.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from inspect_ai.scorer import Metric, SampleScore, metric

from mgbench.validation.eval import metrics as mg
from mgbench.validation.eval.verdict import FAST_PS

RATE_KEYS = ("pass",) + tuple(f"fast_{p:g}" for p in FAST_PS) + ("sol",)


def groups_of(meta: dict[str, Any] | None) -> list[str]:
    """ "all", "level N", "dim X" for each dimension and "tradeoff T" for each trade-off tag (a task counts
    in each of its dims and trade-offs; a sample without tags, from a dataset before them, in none)."""
    meta = meta or {}
    dims = [f"dim {d}" for d in (meta.get("dims") or ["?"])]
    return ["all", f"level {meta.get('level', '?')}"] + dims + [f"tradeoff {t}" for t in (meta.get("tradeoffs") or [])]


def _meta(s: SampleScore) -> dict[str, Any]:
    return {**(s.sample_metadata or {}), **(s.score.metadata or {})}


def _name(group: str, key: str) -> str:
    return key if group == "all" else f"{group}/{key}"


def _ordered(groups: Iterable[str]) -> list[str]:
    return sorted(set(groups), key=lambda g: (g != "all", not g.startswith("level"), g))


def _number(x: Any) -> float:
    """A reduced value as a number, 0 for None or NaN."""
    return 0.0 if x is None or math.isnan(float(x)) else float(x)


@metric
def rates() -> Metric:
    """Mean over tasks of each rate key, overall ("pass", "fast_1", ...) and per group
    ("level 2/pass", "dim tensor/fast_1.5", ...)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        values: dict[str, list[float]] = {}
        timed: set[str] = set()  # groups with a sample whose speed counts
        for s in scores:
            value = s.score.value if isinstance(s.score.value, dict) else {}
            for g in groups_of(_meta(s)):
                if _number(value.get("timed")):
                    timed.add(g)
                for key in RATE_KEYS:
                    x = value.get(key)
                    if x is not None and not math.isnan(float(x)):
                        values.setdefault(_name(g, key), []).append(float(x))
        names = [
            _name(g, k)
            for g in _ordered(g for s in scores for g in groups_of(_meta(s)))
            for k in RATE_KEYS
            if not k.startswith("fast_") or g in timed
        ]
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
            counted = m.get("counted_correct", m.get("correct"))
            samples = mg.correct_speedups([mg.Sample(bool(counted), m.get("counted_speedup"))])
            for g in groups_of(m):
                per.setdefault(g, []).extend(samples)
        return {_name(g, "geomean_speedup"): mg.geomean(per[g]) for g in _ordered(per) if per[g]}

    return compute
