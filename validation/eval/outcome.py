"""Turn rank-pool outcomes of eval jobs into (status, reason) and derive speedups and review flags."""

from __future__ import annotations

import math
import re
from typing import Any

from mgbench.validation.pool import JobOutcome

_ERR = re.compile(r"^rank (\d+): (\w+): (.*?)(?: \(([\w.<>-]+:\d+)\))?$", re.S)


def classify(oc: JobOutcome, phase: str) -> tuple[str, str]:
    """("ok" | "incorrect" | "error" | "timeout", reason) of one job's outcome."""
    if oc.status == "timeout":
        return "timeout", f"{phase}: {oc.reason}: solution() hung or is too slow (see --timeout)"
    if oc.status == "crashed":
        return "error", f"{phase}: {oc.reason} (the candidate killed or crashed its process?)"
    if oc.status == "desync":
        return "error", f"{phase}: ranks desynchronized (unmatched collectives in the candidate)"
    if oc.status == "error":
        m = _ERR.match(oc.reason)
        if m and m.group(2) == "CandidateRejected":
            return "incorrect", f"{phase}: rank {m.group(1)}: {m.group(3)}"
        if m and m.group(2) == "CandidateError":
            return "error", f"{phase}: rank {m.group(1)}: {m.group(3)}"
        if m:
            return "error", f"{phase}: harness error on rank {m.group(1)}: {m.group(2)}: {m.group(3)}"
        return "error", f"{phase}: {oc.reason}"
    for r, res in enumerate(oc.results):
        why = (res or {}).get("result", {}).get("reason", "")
        if why:
            return "incorrect", f"{phase}: rank {r}: {why}"
    return "ok", ""


def rank_results(oc: JobOutcome) -> list[dict[str, Any]]:
    return [(r or {}).get("result", {}) for r in oc.results]


def combine_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One stats dict from repeated timings of the same function: the mean of their medians (so an
    ABBA order cancels drift), the widest p10/p90, the largest cv, all iterations."""
    return {
        **runs[0],
        "median_ms": sum(r["median_ms"] for r in runs) / len(runs),
        "p10_ms": min(r["p10_ms"] for r in runs),
        "p90_ms": max(r["p90_ms"] for r in runs),
        "cv": max(r["cv"] for r in runs),
        "iters": sum(r["iters"] for r in runs),
        "run_medians_ms": [r["median_ms"] for r in runs],
    }


def in_run_noise(ref: dict[str, Any], cand: dict[str, Any]) -> float:
    """Noise floor of a ratio of medians: a 3-sigma bound from cv and iteration counts, or the
    relative spread between repeated runs of the same function if larger (>= 1.01)."""
    se = 1.2533 * math.sqrt(ref["cv"] ** 2 / max(ref["iters"], 1) + cand["cv"] ** 2 / max(cand["iters"], 1))
    spread = [
        (max(m) - min(m)) / (sum(m) / len(m))
        for s in (ref, cand)
        if len(m := s.get("run_medians_ms") or []) > 1 and sum(m) > 0
    ]
    return max(1.01, 1.0 + 3.0 * se, 1.0 + max(spread, default=0.0))


def speedups(ref: dict[str, Any] | None, cand: dict[str, Any], baselines: list[dict[str, Any]]) -> dict[str, float]:
    """{"reference": same-run speedup, "<baseline>@<hardware>": speedup vs each recorded baseline}."""
    c = cand["median_ms"]
    out: dict[str, float] = {}
    if ref and c > 0:
        out["reference"] = ref["median_ms"] / c
    for b in baselines:
        if b.get("baseline") != "null" and b.get("median_ms") and c > 0:
            out[f"{b['baseline']}@{b.get('hardware', '?')}"] = float(b["median_ms"]) / c
    return out


def noise_floor(baselines: list[dict[str, Any]], ref: dict[str, Any] | None, cand: dict[str, Any]) -> tuple[float, str]:
    """(noise floor as a speedup ratio >= 1, where it came from): 1 + the null baseline's p95 of
    |speedup - 1|, else the in-run estimate."""
    recorded = [float(b["noise_speedup_p95"]) for b in baselines if b.get("noise_speedup_p95") is not None]
    if recorded:  # the null baseline's bootstrap p95 of |speedup - 1|
        return 1.0 + max(recorded), "recorded null baseline (p95 of |speedup - 1|)"
    if ref:
        return in_run_noise(ref, cand), "in-run estimate (3 sigma of the median ratio or run-to-run spread)"
    return math.nan, "unknown"


def current_timing(baselines: list[dict[str, Any]], version: int) -> tuple[list[dict[str, Any]], int]:
    """(baselines timed with this timing method version, how many were dropped as older)."""
    keep = [b for b in baselines if int(b.get("timing_version") or 1) == version]
    return keep, len(baselines) - len(keep)


def roofline_ms(baselines: list[dict[str, Any]]) -> float | None:
    bounds = [
        float(b["roofline"]["bound_ms"])
        for b in baselines
        if isinstance(b.get("roofline"), dict) and b["roofline"].get("bound_ms")
    ]
    return max(bounds) if bounds else None


def timing_gap_reason(ref_ms: float, ref_synced: float | None, cand_ms: float, cand_synced: float | None) -> str:
    """Reject when whole-device-synchronized wall time shows work the timed events did not see."""
    if cand_synced is None or ref_synced is None:
        return ""
    allowance = max(ref_synced - ref_ms, 0.0) + 0.02
    if cand_synced > 1.5 * cand_ms + allowance:
        return (
            f"timing: events measured {cand_ms:.4g} ms per call but the device stayed busy "
            f"{cand_synced:.4g} ms (work left on a side stream that the timed region did not see)"
        )
    return ""


def review_flags(speedup: float | None, cand_ms: float, bound_ms: float | None, max_speedup: float) -> list[str]:
    flags = []
    if speedup is not None and speedup > max_speedup:
        flags.append(f"review: speedup {speedup:.3g}x exceeds the sanity bound {max_speedup:g}x")
    if bound_ms is not None and cand_ms < bound_ms:
        flags.append(f"review: {cand_ms:.4g} ms is faster than the roofline bound {bound_ms:.4g} ms")
    return flags
