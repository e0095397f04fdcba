"""Every number the dataset card shows, computed from the rows (nothing typed by hand)."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping
from typing import Any

from mgbench import backends
from mgbench.dataset.baselines import KIND_ORDER, Hardware, kind
from mgbench.sol import sol_score


def markdown(header: list[str], rows: list[list[Any]]) -> str:
    """A markdown table; floats with 4 significant digits, None as a dash."""

    def cell(x: Any) -> str:
        if x is None:
            return "-"
        if isinstance(x, float):
            return f"{x:.4g}"
        return str(x).replace("|", "\\|")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def coverage(rows: list[dict[str, Any]]) -> str:
    """Tasks per parallelism dim (rows) x workload (columns), with totals."""
    dims = sorted({d for r in rows for d in r["dims"]})
    workloads = sorted({r["workload"] for r in rows})
    count = Counter((d, r["workload"]) for r in rows for d in r["dims"])
    body = [
        [f"**{d}**", *[count[(d, w)] or "" for w in workloads], sum(count[(d, w)] for w in workloads)] for d in dims
    ]
    body.append(["**tasks**", *[sum(r["workload"] == w for r in rows) for w in workloads], len(rows)])
    return markdown(["dim \\ workload", *workloads, "tasks"], body)


def tradeoff_coverage(rows: list[dict[str, Any]], vocabulary: Mapping[str, Any]) -> str:
    """Families and tasks per trade-off (taxonomy/tradeoffs.yaml, in its order, every tag of the vocabulary
    listed even when no task carries it), with tasks per level and tasks with GPU baselines; a task with
    several trade-offs counts in each. Tags the vocabulary lacks and rows without any (a dataset built
    before the tags) get rows of their own."""
    found = {t for r in rows for t in r.get("tradeoffs") or []}
    body = []
    for tag in [*vocabulary, *sorted(found - set(vocabulary))]:
        here = [r for r in rows if tag in (r.get("tradeoffs") or [])]
        body.append([f"`{tag}`", getattr(vocabulary.get(tag), "meaning", None), *_tradeoff_counts(here)])
    if untagged := [r for r in rows if not r.get("tradeoffs")]:
        body.append(["(none)", "tasks without trade-off tags", *_tradeoff_counts(untagged)])
    header = ["trade-off", "what a fast solution must get right", "families", "tasks", "by level", "timed"]
    return markdown(header, body)


def _tradeoff_counts(rows: list[dict[str, Any]]) -> list[Any]:
    levels = Counter(r["level"] for r in rows)
    return [
        len({r["family"] for r in rows}),
        len(rows),
        ", ".join(f"L{lv}: {n}" for lv, n in sorted(levels.items())) or None,
        sum(bool(r.get("baselines")) for r in rows),
    ]


def per_level(rows: list[dict[str, Any]]) -> str:
    levels = sorted({r["level"] for r in rows})
    body = []
    for lv in levels:
        here = [r for r in rows if r["level"] == lv]
        body.append(
            [
                f"level{lv}",
                len(here),
                len({r["family"] for r in here}),
                ", ".join(sorted({r["dtype"] for r in here})),
                ", ".join(str(w) for w in sorted({w for r in here for w in r["world_sizes"]})),
            ]
        )
    return markdown(["split", "tasks", "families", "dtypes", "world sizes"], body)


def hardware_table(hardware: dict[str, Hardware], rows: list[dict[str, Any]]) -> str:
    body = []
    for tag, hw in sorted(hardware.items()):
        n = sum(any(b["hardware"] == tag for b in r["baselines"]) for r in rows)
        body.append([f"`{tag}`", f"{hw.count}x {hw.gpu}", hw.topology.replace("\n", " "), hw.versions, n])
    return markdown(["hardware", "GPUs", "topology", "software", "tasks timed"], body)


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def _mean(xs: list[float | None]) -> float | None:
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _median(xs: list[float | None]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def baseline_sol(b: dict[str, Any], eager: dict[str, Any] | None) -> float | None:
    """The baseline's SOL score with the eager reference as T_base and the task's roofline bound as
    T_SOL (mgbench.sol.sol_score; None where undefined, e.g. no bound)."""
    if not eager:
        return None
    return sol_score(b.get("median_ms"), eager.get("median_ms"), (b.get("roofline") or {}).get("bound_ms")).value


def baseline_summary(rows: list[dict[str, Any]]) -> str:
    """Per hardware, world size and baseline kind: tasks timed/failed, speedup over eager, SOL score
    against eager and the roofline bound, roofline fraction, noise floor."""
    groups: dict[tuple, list[tuple[dict[str, Any], dict[str, Any] | None]]] = {}
    for r in rows:
        eager = {(b["hardware"], b["world_size"]): b for b in r["baselines"] if b["baseline"] == "eager"}
        for b in r["baselines"]:
            groups.setdefault((b["hardware"], b["world_size"], kind(b["baseline"])), []).append(
                (b, eager.get((b["hardware"], b["world_size"])))
            )
    body = []
    for (tag, ws, k), pairs in sorted(groups.items(), key=lambda kv: (*kv[0][:2], KIND_ORDER.get(kv[0][2], 9))):
        ok = [(b, e) for b, e in pairs if b["status"] == "ok"]
        speed = [e["median_ms"] / b["median_ms"] for b, e in ok if e and e["median_ms"] and b["median_ms"]]
        body.append(
            [
                f"`{tag}`",
                ws,
                k,
                len(ok),
                sum(b["status"] == "failed" for b, _ in pairs),
                _median([b["median_ms"] for b, _ in ok]),
                _geomean(speed) if k != "eager" else None,
                _mean([baseline_sol(b, e) for b, e in ok]) if k != "eager" else None,
                _median([b["fraction_of_roofline"] for b, _ in ok]),
                _median([b["noise_speedup_p95"] for b, _ in ok]),
            ]
        )
    return markdown(
        [
            "hardware",
            "world size",
            "baseline",
            "tasks timed",
            "failed",
            "median ms",
            "geomean speedup vs eager",
            "mean SOL score (eager 0.5, roofline 1)",
            "median fraction of roofline",
            "median noise floor (p95 of abs(speedup - 1))",
        ],
        body,
    )


def validation_summary(rows: list[dict[str, Any]]) -> str:
    """Tasks checked per backend, device, world size and size: where every task was proven, and what it proves."""
    count = Counter((v["backend"], v["hardware"], v["world_size"], v["size"]) for r in rows for v in r["validation"])
    return markdown(
        ["backend", "hardware", "world size", "size", "tasks passed", "proves"],
        [
            [*k, n, backends.BACKENDS[k[0]].proves if k[0] in backends.BACKENDS else "correctness"]
            for k, n in sorted(count.items())
        ],
    )


def provenance(rows: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """(table of sources with their licenses and task counts, licenses found)."""
    count = Counter()
    for r in rows:
        p = r["provenance"]
        if p["kind"] == "mined":
            src = f"[{p['repository']}]({p['url']})" if p.get("url") else str(p.get("repository"))
            count[(f"mined: {src}", p.get("license") or "unknown")] += 1
        else:
            count[("generated from mgbench's templates", "apache-2.0")] += 1
    body = [[src, lic, n] for (src, lic), n in sorted(count.items())]
    return markdown(["source", "license", "tasks"], body), sorted({lic for _, lic in count})
