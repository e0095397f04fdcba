"""Human-readable output of eval results: one block per evaluation, one table for a batch."""

from __future__ import annotations

from typing import Any

from mgbench.report import table
from mgbench.validation.eval.verdict import cpu_timing

REWRITE_SINCE = 6  # the integrity_version from which the last trial rewrites the inputs in place (runner.py)


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g} ms"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}x"


def describe(rec: dict[str, Any]) -> str:
    """A few aligned lines: verdict, checks, timing, speedups, flags."""
    st = rec.get("static") or {}
    verdict = rec["status"].upper()
    lines = [
        (
            "task",
            f"{rec['task_id']} (level {rec.get('level')}, world size {rec['world_size']}, {rec['backend']}, "
            f"size {rec['size']}, {rec.get('hardware', '')})",
        ),
        ("solution", f"{rec['sample_path']} (sha256 {rec['sample_hash'][:12]})"),
        (
            "verdict",
            verdict
            + (
                f": {rec['reason']}"
                if rec["reason"]
                else f" ({rec['trials_passed']}/{rec['trials']} trials"
                + (" + 1 after timing" if rec.get("timing") else ", not timed")
                + (
                    " + 1 on inputs rewritten in place"
                    if int(rec.get("integrity_version") or 0) >= REWRITE_SINCE
                    else ""
                )
                + f", seed {rec['seed']})"
            ),
        ),
        (
            "static",
            "ok"
            if st.get("available") and not st.get("findings")
            else st.get("message", "-")
            if not st.get("findings")
            else "; ".join(f"{f['severity']}: {f['message']} (line {f['line']})" for f in st["findings"][:3]),
        ),
    ]
    if rec.get("tolerance"):
        t = rec["tolerance"]
        lines.append(
            (
                "accuracy",
                f"max error {rec.get('max_error') or 0:.3g} x row rms (tolerance atol_rel "
                f"{t['atol_rel']:.3g}, rtol {t['rtol']:g})",
            )
        )
    tm = rec.get("timing")
    if tm:
        c, r = tm["candidate"], tm["reference"]
        lines.append(
            (
                "candidate",
                f"median {_ms(c['median_ms'])} (p10 {_ms(c['p10_ms'])}, p90 {_ms(c['p90_ms'])}, "
                f"cv {c['cv']:.3f}, {c['iters']} iters)",
            )
        )
        lines.append(
            (
                "reference",
                f"median {_ms(r['median_ms'])} (p10 {_ms(r['p10_ms'])}, p90 {_ms(r['p90_ms'])}, "
                f"cv {r['cv']:.3f}, {r['iters']} iters; same run)",
            )
        )
        for name, sp in (rec.get("speedups") or {}).items():
            lines.append(("speedup", f"{_x(sp)} vs {name}"))
        if rec.get("noise_floor") is not None:
            within = " (within noise)" if rec.get("within_noise") else ""
            lines.append(("noise", f"floor {_x(rec['noise_floor'])} from {rec['noise_source']}{within}"))
        if cpu_timing(rec):
            where = f"{rec.get('backend')}/{rec.get('size')} ({rec.get('hardware', '')})"
            lines.append(
                ("note", f"timed on {where}: these timings are not results; `mgbench score` keeps them out of fast_p")
            )
        if rec.get("roofline_fraction") is not None:
            lines.append(("roofline", f"{rec['roofline_fraction']:.1%} of the roofline bound"))
    for f in rec.get("flags") or []:
        lines.append(("flag", f))
    w = max(len(k) for k, _ in lines)
    return "\n".join(f"{k.ljust(w)}  {v}" for k, v in lines)


def batch_table(recs: list[dict[str, Any]]) -> str:
    rows = [
        (
            r["task_id"],
            r["sample"],
            r["status"],
            _x(r.get("speedup")),
            (r.get("timing") or {}).get("candidate", {}).get("median_ms"),
            "yes" if r.get("review") else "",
            (r.get("reason") or "")[:70],
        )
        for r in recs
    ]
    return table(rows, ["task", "sample", "status", "speedup", "median_ms", "review", "reason"])
