"""Scoring metrics (pure functions, no I/O).

pass@k is the unbiased estimator of Chen et al. 2021 (Codex paper): with n samples of a task of
which c are correct, pass@k = 1 - C(n-c, k) / C(n, k), the chance that at least one of k samples
drawn without replacement is correct. fast_p@k is the same estimator where a sample counts only if
it is correct AND its speedup exceeds p (KernelBench's fast_p, generalized to k samples).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    """One evaluated solution: correct or not, its speedup (None when it was not timed) and its SOL score
    (None where undefined)."""

    correct: bool
    speedup: float | None = None
    roofline_fraction: float | None = None
    sol: float | None = None


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task; needs 0 <= c <= n and 1 <= k <= n."""
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):  # C(n-c, k) / C(n, k) as a stable product
        prod *= 1.0 - k / i
    return 1.0 - prod


def fast_count(samples: Sequence[Sample], p: float) -> int:
    """How many samples are correct with speedup > p (p <= 0 counts every correct sample)."""
    return sum(1 for s in samples if s.correct and (p <= 0 or (s.speedup is not None and s.speedup > p)))


def fast_p_at_k(samples: Sequence[Sample], p: float, k: int) -> float:
    return pass_at_k(len(samples), fast_count(samples, p), k)


def mean_over_tasks(per_task: dict[str, Sequence[Sample]], k: int, p: float | None = None) -> float | None:
    """Average of pass@k (p None) or fast_p@k over tasks having at least k samples; None if none do."""
    vals = [
        pass_at_k(len(s), fast_count(s, 0), k) if p is None else fast_p_at_k(s, p, k)
        for s in per_task.values()
        if len(s) >= k
    ]
    return sum(vals) / len(vals) if vals else None


def mean_sol(per_task: dict[str, Sequence[Sample]]) -> float | None:
    """Mean over tasks of the mean SOL score of a task's samples where it is defined; None if nowhere."""
    per = [[s.sol for s in ss if s.sol is not None] for ss in per_task.values()]
    means = [sum(v) / len(v) for v in per if v]
    return sum(means) / len(means) if means else None


def geomean(xs: Iterable[float]) -> float | None:
    """Geometric mean of positive numbers; None for an empty input."""
    vals = [float(x) for x in xs]
    if not vals:
        return None
    if any(not x > 0 for x in vals):
        raise ValueError("geometric mean needs positive values")
    return math.exp(sum(math.log(x) for x in vals) / len(vals))


def correct_speedups(samples: Iterable[Sample]) -> list[float]:
    return [s.speedup for s in samples if s.correct and s.speedup is not None and s.speedup > 0]


def best_speedup(samples: Sequence[Sample]) -> float | None:
    """The task's best speedup among its correct samples (None when none is correct and timed)."""
    sp = correct_speedups(samples)
    return max(sp) if sp else None


def solved_fraction(per_task: dict[str, Sequence[Sample]], threshold: float) -> float:
    """Fraction of tasks with some correct sample at speedup >= threshold (threshold <= 0: correct)."""
    if not per_task:
        return 0.0
    hit = 0
    for samples in per_task.values():
        if threshold <= 0:
            hit += any(s.correct for s in samples)
        else:
            b = best_speedup(samples)
            hit += b is not None and b >= threshold
    return hit / len(per_task)


def solved_curve(per_task: dict[str, Sequence[Sample]], thresholds: Sequence[float]) -> list[float]:
    return [solved_fraction(per_task, t) for t in thresholds]


def thresholds_for(per_task: dict[str, Sequence[Sample]], lo: float = 0.25, n: int = 200) -> list[float]:
    """Log-spaced speedup thresholds from `lo` to a bit past the best speedup seen."""
    best = max((b for s in per_task.values() if (b := best_speedup(s)) is not None), default=2.0)
    hi = max(2.0, best * 1.1)
    return [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]
