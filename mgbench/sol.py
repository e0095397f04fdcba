"""The SOL score of SOL-ExecBench: a time against a baseline and the speed-of-light (roofline) bound.
On the ground floor so that the dataset card and the scorer share it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SolScore:
    """A SOL score and, where it is None, why."""

    value: float | None
    why: str = ""


def sol_score(t_ms: float | None, t_base_ms: float | None, t_sol_ms: float | None) -> SolScore:
    """SOL-ExecBench's bounded score S = 1 / (1 + (T - T_SOL) / (T_base - T_SOL)): 0.5 at the baseline's
    time, 1 at the speed of light (the roofline bound), toward 0 as T grows. Edges: a missing time or
    bound gives None; a baseline at or under its bound leaves no headroom to score (None); T under the
    bound is impossible for a correct solution, so it is the caller's suspicious verdict, never 1 (None
    here)."""
    if t_ms is None or t_base_ms is None or not t_ms > 0 or not t_base_ms > 0:
        return SolScore(None, "not timed")
    if t_sol_ms is None or not t_sol_ms > 0:
        return SolScore(None, "no roofline bound for this task on this hardware")
    if t_base_ms <= t_sol_ms:
        return SolScore(None, "the baseline is at or under its roofline bound: no headroom to score")
    if t_ms < t_sol_ms:
        return SolScore(None, "faster than the roofline bound: suspicious, not scored")
    return SolScore(1.0 / (1.0 + (t_ms - t_sol_ms) / (t_base_ms - t_sol_ms)))
