"""What `mgbench score` counts of one sample: its eval records (one per world size) -> a verdict.

Rules (docs/eval.md "What score counts"):
- correct only if correct at every world size it was judged at; its speedup is the smallest of them;
- suspicious speed (the sanity bound of --max-speedup, faster than the roofline bound, or a record's
  own `suspicious` field) is a verdict: the sample counts as neither passed nor fast unless the user
  opts in (`accept_suspicious`);
- a speedup within the noise floor counts as none (1.0x);
- timings from CPU / gloo / smoke size are not results: such a sample's speedup is kept out of fast_p
  and the geometric means unless the user opts in (`count_cpu_timings`); its correctness counts;
- a group reports fast_p only when some sample's speed counts (`timed`: timed where timings are
  results; an incorrect sample of such a run counts, as not fast); every sample of the group is in it;
- the SOL score (mgbench.sol) of a sample whose speed counts: 0 when not counted correct, S of
  its counted time against the basis time and the roofline bound otherwise (None where undefined).
Every exclusion is named in the sample's `excluded` list, which score's JSON carries.

This module is the one scoring rule: `mgbench score`, the Inspect scorer and metrics
(mgbench.inspect_eval) and the RL reward (mgbench.rl) all count a record through `judge`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from mgbench import backends
from mgbench.sol import sol_score
from mgbench.validation.eval.metrics import Sample

FAST_PS = (1.0, 1.5, 2.0)  # the p of fast_p reported by score, Inspect and the card

# Review flags of mgbench.validation.eval.outcome.review_flags that make a speed suspicious (a table, so that
# a new bound is one line here).
SUSPICIOUS_FLAGS = {
    "exceeds the sanity bound": "speed past the sanity bound (--max-speedup)",
    "faster than the roofline bound": "speed past the roofline bound",
}


@dataclass(frozen=True)
class Rules:
    accept_suspicious: bool = False  # count samples of suspicious speed as passed and fast
    count_cpu_timings: bool = False  # count speedups timed on CPU / gloo / smoke size
    exclude_flagged: bool = False  # count any sample flagged for review as wrong


@dataclass
class Verdict:
    """One sample as score counts it, and why."""

    task_id: str
    sample: str
    sample_hash: str
    world_sizes: list[int]
    backend: str
    size: str
    correct: bool  # as judged by eval, at every world size
    counted_correct: bool  # what pass@k counts
    speedup: float | None  # as measured (smallest over world sizes)
    counted_speedup: float | None  # what fast_p@k and the geometric means count
    roofline_fraction: float | None
    timed: bool = False  # its speed counts (timed where timings are results, or CPU timings counted)
    cpu_timed: bool = False  # some record was timed on CPU / gloo / smoke size
    sol_score: float | None = None  # mgbench.sol score of the counted time (0 when not counted correct)
    suspicious: list[str] = field(default_factory=list)  # why its speed is suspicious
    excluded: list[str] = field(default_factory=list)
    level: Any = None
    dims: list[str] = field(default_factory=list)
    tradeoffs: list[str] = field(default_factory=list)  # none on records from before the trade-off tags

    def sample_of(self) -> Sample:
        return Sample(
            self.counted_correct,
            self.counted_speedup,
            self.roofline_fraction if self.counted_speedup is not None else None,
            sol=self.sol_score,
        )

    def fast(self, p: float) -> bool:
        """Counted as correct and faster than p."""
        return self.counted_correct and self.counted_speedup is not None and self.counted_speedup > p

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cpu_timing(r: dict[str, Any]) -> bool:
    """Whether a record's timings are not results: CPU ranks, gloo, ranks sharing GPUs (host-staged), or
    the smoke size (mgbench/backends.py says which backends' times are results)."""
    kind = backends.BACKENDS.get(str(r.get("backend")))
    return (
        kind is None
        or not kind.timings_are_results
        or r.get("size") == "smoke"
        or "cpu" in str(r.get("hardware", "")).lower()
    )


def suspicious_reasons(r: dict[str, Any]) -> list[str]:
    """Why a record's speed is suspicious: its review flags past a bound, or its `suspicious` field."""
    out = [
        f"{why}: {flag.removeprefix('review: ')}"
        for flag in r.get("flags") or []
        for key, why in SUSPICIOUS_FLAGS.items()
        if key in flag
    ]
    own = r.get("suspicious")
    if own:
        why = own if isinstance(own, list) else [own if isinstance(own, str) else "marked by eval"]
        out += [f"suspicious: {x}" for x in why]
    return out


def basis_speedup(r: dict[str, Any]) -> float | None:
    """The speedup a record is counted by: `_speedup` (set by score for its --basis), else its own."""
    return r["_speedup"] if "_speedup" in r else r.get("speedup")


def timing_on(r: dict[str, Any]) -> bool:
    """Whether the record's eval timed the candidate (records before `timing_on` existed: timed when it
    has a speedup; an incorrect one is taken as from a timed run)."""
    on = r.get("timing_on")
    if on is not None:
        return bool(on)
    return basis_speedup(r) is not None or not r.get("correct")


def record_sol(r: dict[str, Any], counted_correct: bool, within_noise: bool, accept_suspicious: bool) -> tuple:
    """(SOL score, why None) of one record whose speed counts: T the candidate's median time (the basis
    time when within the noise floor), T_base = T x the basis speedup, T_SOL its roofline bound."""
    cand_ms = ((r.get("timing") or {}).get("candidate") or {}).get("median_ms")
    bound = r.get("roofline_ms")
    if bound is None and r.get("roofline_fraction") and cand_ms:
        bound = r["roofline_fraction"] * cand_ms
    if not counted_correct:
        return (0.0, "") if bound else (None, "no roofline bound for this task on this hardware")
    sp = basis_speedup(r)
    base_ms = cand_ms * sp if cand_ms and sp else None
    t_ms = base_ms if within_noise else cand_ms
    if accept_suspicious and t_ms and bound and base_ms and t_ms < bound < base_ms:
        return 1.0, "faster than the roofline bound, accepted (--accept-suspicious): capped at 1"
    sol = sol_score(t_ms, base_ms, bound)
    return sol.value, sol.why


def judge(records: Iterable[dict[str, Any]], rules: Rules) -> Verdict:
    """The verdict of one sample from its records (the same task, sample hash, backend and size)."""
    recs = sorted(records, key=lambda r: r.get("world_size") or 0)
    cpu = any(cpu_timing(r) for r in recs)
    v = _judge(recs, rules, cpu)
    v.timed = all(timing_on(r) for r in recs) and (not cpu or rules.count_cpu_timings)
    if v.timed and v.correct and v.speedup is None:
        v.timed = False  # correct but untimed (a phase skipped): nothing to count its speed by
    if v.timed:
        noise = v.counted_speedup == 1.0 and any(r.get("within_noise") for r in recs)
        sols = [record_sol(r, v.counted_correct, noise, rules.accept_suspicious) for r in recs]
        if all(val is not None for val, _ in sols):
            v.sol_score = min(val for val, _ in sols)
        whys = sorted({why for _, why in sols if why})
        v.excluded += [f"SOL score: {why}" for why in whys]
    return v


def _judge(recs: list[dict[str, Any]], rules: Rules, cpu: bool) -> Verdict:
    first = recs[0]
    correct = all(bool(r.get("correct")) for r in recs)
    speeds = [basis_speedup(r) for r in recs]
    speedup = min(speeds) if correct and speeds and None not in speeds else None
    roof = [r.get("roofline_fraction") for r in recs if r.get("roofline_fraction") is not None]
    v = Verdict(
        first["task_id"],
        first.get("sample", ""),
        first["sample_hash"],
        [r.get("world_size") for r in recs],
        first.get("backend", ""),
        first.get("size", ""),
        correct,
        correct,
        speedup,
        speedup,
        min(roof) if roof else None,
        level=first.get("level", "?"),
        dims=list(first.get("dims") or ["?"]),
        tradeoffs=list(first.get("tradeoffs") or []),
    )
    if not correct:
        bad = next(r for r in recs if not r.get("correct"))
        v.excluded.append(f"not correct at world size {bad.get('world_size')}: {bad.get('status')}")
        v.counted_speedup = None
        return v
    v.cpu_timed = speedup is not None and cpu
    sus = v.suspicious = [why for r in recs for why in suspicious_reasons(r)]
    if sus and not rules.accept_suspicious:
        v.counted_correct, v.counted_speedup = False, None
        v.excluded += [f"{why} (counted as neither passed nor fast; --accept-suspicious counts it)" for why in sus]
        return v
    if rules.exclude_flagged and any(r.get("review") for r in recs):
        v.counted_correct, v.counted_speedup = False, None
        v.excluded.append("flagged for review (--exclude-flagged)")
        return v
    if v.counted_speedup is not None and any(r.get("within_noise") for r in recs):
        v.counted_speedup = 1.0
        v.excluded.append("speedup within the noise floor: counted as none (1.0x)")
    if v.counted_speedup is not None and cpu and not rules.count_cpu_timings:
        v.counted_speedup = None
        v.excluded.append(
            "timed on CPU/gloo/shared-GPU/smoke: not a result, kept out of fast_p and speedups "
            "(--count-cpu-timings counts it)"
        )
    return v
