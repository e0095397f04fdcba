"""The reward of one completion, from the one scoring rule (mgbench.validation.eval.verdict.judge).

    0                      no code, an incorrect answer, any integrity rejection, suspicious speed
    S (the SOL score)      correct, timed where timings are results, with a roofline bound
    s / (1 + s)            correct, timed where timings are results, no roofline bound: S with T_SOL = 0
                           (s the counted speedup; 0.5 at the baseline like S)
    CORRECT_ONLY (0.5)     correct where timings are not results (CPU, gloo, shared-GPU, smoke) or
                           untimed: correctness only, flagged, at S's value for "as fast as the baseline"

Every reward is in [0, 1]; only a correct answer earns more than 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from mgbench.validation.eval.verdict import Rules, Verdict, judge

CORRECT_ONLY = 0.5

# kind -> what the reward rests on (a table, so that a new tier is one line here and in the docs)
KINDS = {
    "no_code": "no ```python code block in the completion",
    "incorrect": "judged incorrect, an error, a timeout or an integrity rejection",
    "suspicious": "correct but of suspicious speed (past the roofline or sanity bound)",
    "sol": "correct; SOL score against the roofline bound",
    "speedup": "correct; no roofline bound on this hardware: s / (1 + s), S with T_SOL = 0",
    "correct_only": "correct; timings here are not results: correctness only",
}


@dataclass(frozen=True)
class Reward:
    """A completion's reward, what it rests on (KINDS) and the verdict behind it (None without code)."""

    value: float
    kind: str
    reason: str = ""
    verdict: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def no_code(reason: str = KINDS["no_code"]) -> Reward:
    return Reward(0.0, "no_code", reason)


def of_verdict(v: Verdict, reason: str = "") -> Reward:
    """The reward of a sample's verdict."""
    d = v.to_dict()
    if not v.correct:
        return Reward(0.0, "incorrect", reason or "; ".join(v.excluded), d)
    if not v.counted_correct:
        return Reward(0.0, "suspicious", "; ".join(v.excluded), d)
    if v.timed and v.sol_score is not None:
        return Reward(v.sol_score, "sol", f"SOL score {v.sol_score:.3f}", d)
    if v.timed and v.counted_speedup is not None:
        s = v.counted_speedup
        return Reward(s / (1.0 + s), "speedup", f"speedup {s:.3g}x, no roofline bound", d)
    return Reward(CORRECT_ONLY, "correct_only", KINDS["correct_only"], d)


def of_records(records: list[dict[str, Any]], rules: Rules | None = None) -> Reward:
    """The reward of one completion from its `mgbench eval` records (one per world size)."""
    if not records:
        return no_code()
    v = judge(records, rules or Rules())
    bad = next((r for r in records if not r.get("correct")), None)
    why = f"{bad.get('status')}: {bad.get('reason')}" if bad else ""
    return of_verdict(v, why)
