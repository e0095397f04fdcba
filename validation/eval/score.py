"""`mgbench score`: metrics over eval results (JSONL), broken down by level, parallelism dimension and
trade-off (taxonomy/tradeoffs.yaml), and a plot of the fraction of tasks solved versus the required
speedup. What a sample counts for (suspicious speed, noise floor, CPU timings, world sizes) is decided in
mgbench.validation.eval.verdict."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mgbench.report import table
from mgbench.store import read_jsonl
from mgbench.validation.eval import metrics
from mgbench.validation.eval.metrics import Sample
from mgbench.validation.eval.verdict import FAST_PS, Rules, Verdict, judge


def result_key(r: dict[str, Any]) -> tuple:
    return (r["task_id"], r["sample_hash"], r.get("world_size"), r.get("backend"), r.get("size"))


def latest_results(paths: Iterable[Path | str]) -> list[dict[str, Any]]:
    """The last record per (task, sample hash, world size, backend, size) over the files."""
    out: dict[tuple, dict[str, Any]] = {}
    for p in paths:
        if not Path(p).is_file():
            raise FileNotFoundError(f"{p}: results file not found (run `mgbench eval ... --results FILE`)")
        for r in read_jsonl(p):
            if "task_id" in r and "sample_hash" in r:
                out[result_key(r)] = r
    return list(out.values())


def basis_speedup(r: dict[str, Any], basis: str) -> float | None:
    """The record's speedup over `basis`: the same run's reference or a recorded baseline."""
    if basis == "reference":
        return r.get("speedup")
    sp = (r.get("speedups") or {}).get(basis)
    if sp is None:
        sp = next((v for k, v in (r.get("speedups") or {}).items() if k.split("@")[0] == basis), None)
    return sp


def verdicts(results: list[dict[str, Any]], basis: str, rules: Rules) -> list[Verdict]:
    """One verdict per sample: its records at every world size judged together (mgbench.validation.eval.verdict)."""
    by_sample: dict[tuple, list[dict[str, Any]]] = {}
    for r in results:
        key = (r["task_id"], r["sample_hash"], r.get("backend"), r.get("size"))
        by_sample.setdefault(key, []).append({**r, "_speedup": basis_speedup(r, basis)})
    return [judge(recs, rules) for _, recs in sorted(by_sample.items(), key=lambda kv: str(kv[0]))]


@dataclass
class Group:
    name: str
    tasks: dict[str, list[Sample]] = field(default_factory=dict)
    timed: bool = False  # some sample was timed where speed counts (Verdict.timed)


def group_by(vs: list[Verdict]) -> dict[str, Group]:
    """Groups "all", "level N", "dim X" and "tradeoff T" (a task with several dims or trade-offs counts in
    each; records without trade-off tags, from before them, count in no "tradeoff" group)."""
    groups: dict[str, Group] = {}
    for v in vs:
        keys = ["all", f"level {v.level}"] + [f"dim {d}" for d in v.dims] + [f"tradeoff {t}" for t in v.tradeoffs]
        for k in keys:
            g = groups.setdefault(k, Group(k))
            g.tasks.setdefault(v.task_id, []).append(v.sample_of())
            g.timed = g.timed or v.timed
    return groups


def group_metrics(g: Group, ks: list[int]) -> dict[str, Any]:
    """pass@k, fast_p@k and speedups of a group; fast_p is None (not 0) when no sample of the group
    was timed where speed counts (none timed, or only CPU timings that are not counted)."""
    samples = [s for ss in g.tasks.values() for s in ss]
    sp = metrics.correct_speedups(samples)
    roof = [s.roofline_fraction for s in samples if s.correct and s.roofline_fraction is not None]
    m: dict[str, Any] = {"tasks": len(g.tasks), "samples": len(samples), "correct": sum(s.correct for s in samples)}
    for k in ks:
        m[f"pass@{k}"] = metrics.mean_over_tasks(g.tasks, k)
        for p in FAST_PS:
            m[f"fast_{p:g}@{k}"] = metrics.mean_over_tasks(g.tasks, k, p) if g.timed else None
    m["geomean_speedup"] = metrics.geomean(sp)
    m["geomean_best_speedup"] = metrics.geomean(
        b for ss in g.tasks.values() if (b := metrics.best_speedup(ss)) is not None
    )
    m["mean_roofline_fraction"] = sum(roof) / len(roof) if roof else None
    m["sol_score"] = metrics.mean_sol(g.tasks)
    return m


def default_ks(vs: list[Verdict]) -> list[int]:
    per_task: dict[str, int] = {}
    for v in vs:
        per_task[v.task_id] = per_task.get(v.task_id, 0) + 1
    n_max = max(per_task.values(), default=1)
    return [k for k in (1, 5, 10, 100) if k <= n_max] or [1]


@dataclass
class ScoreReport:
    summary: dict[str, dict[str, Any]]  # group -> metrics
    groups: dict[str, Group]
    verdicts: list[Verdict]
    warnings: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"groups": self.summary, "warnings": self.warnings, "samples": [v.to_dict() for v in self.verdicts]}


def warnings_of(vs: list[Verdict], rules: Rules) -> list[str]:
    """Loud lines for what the figures leave out or rest on."""
    out = []
    cpu = [v for v in vs if v.cpu_timed]
    if cpu:
        counted = (
            "COUNTED in fast_p and speedups (--count-cpu-timings)"
            if rules.count_cpu_timings
            else "kept out of fast_p and speedups (--count-cpu-timings counts them)"
        )
        out.append(
            f"{len(cpu)} of {len(vs)} sample(s) were timed on CPU/gloo/shared-GPU/smoke: "
            f"such timings are not results; {counted}"
        )
    sus = [v for v in vs if v.suspicious]
    if sus and not rules.accept_suspicious:
        out.append(
            f"{len(sus)} sample(s) of suspicious speed counted as neither passed nor fast "
            "(see samples[].excluded; --accept-suspicious counts them)"
        )
    if sus and rules.accept_suspicious:
        out.append(
            f"--accept-suspicious: {len(sus)} sample(s) of suspicious speed (past the roofline or "
            "sanity bound) are COUNTED as passed and fast"
        )
    noise = sum(any("noise floor" in e for e in v.excluded) for v in vs)
    if noise:
        out.append(f"{noise} sample(s) within the noise floor: counted as no speedup (1.0x)")
    return out


def score(
    paths: list[str], ks: list[int] | None = None, basis: str = "reference", rules: Rules | None = None
) -> tuple[dict[str, dict[str, Any]], dict[str, Group]]:
    """(metrics per group, groups) of score_report."""
    rep = score_report(paths, ks, basis, rules)
    return rep.summary, rep.groups


def score_report(
    paths: list[str], ks: list[int] | None = None, basis: str = "reference", rules: Rules | None = None
) -> ScoreReport:
    """Verdicts of every sample in the result files, metrics per group, and the warnings to print."""
    rules = rules or Rules()
    results = latest_results(paths)
    if not results:
        raise ValueError("no eval results in " + ", ".join(map(str, paths)))
    vs = verdicts(results, basis, rules)
    ks = ks or default_ks(vs)
    groups = group_by(vs)
    order = sorted(groups, key=lambda k: (k != "all", not k.startswith("level"), k))
    return ScoreReport({k: group_metrics(groups[k], ks) for k in order}, groups, vs, warnings_of(vs, rules))


def format_table(summary: dict[str, dict[str, Any]]) -> str:
    cols = list(next(iter(summary.values())).keys())
    rows = [
        [name] + [("-" if v is None else round(v, 4) if isinstance(v, float) else v) for v in m.values()]
        for name, m in summary.items()
    ]
    return table(rows, ["group"] + cols)


def best_sols(per_task: dict[str, list[Sample]]) -> list[float]:
    """Each task's best SOL score over its samples, for the tasks where one is defined."""
    return [max(v) for ss in per_task.values() if (v := [s.sol for s in ss if s.sol is not None])]


def plot(groups: dict[str, Group], path: Path | str, basis: str) -> Path:
    """PNG: fraction of tasks solved (a correct sample at >= threshold speedup) vs the threshold; beside
    it, where SOL scores exist, the fraction of tasks whose best SOL score reaches each value."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    names = ["all"] + sorted(k for k in groups if k.startswith("level"))
    with_sol = bool(best_sols(groups["all"].tasks))
    fig, axes = plt.subplots(1, 2 if with_sol else 1, figsize=(12 if with_sol else 7, 4.5), squeeze=False)
    ax = axes[0][0]
    ths = metrics.thresholds_for(groups["all"].tasks)
    for name in names:
        ax.step(
            ths,
            metrics.solved_curve(groups[name].tasks, ths),
            where="post",
            label=f"{name} ({len(groups[name].tasks)} tasks)",
            linewidth=2 if name == "all" else 1,
        )
    ax.axvline(1.0, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel(f"required speedup over {basis} (log scale)")
    ax.set_ylabel("fraction of tasks solved")
    ax.set_title("mgbench: tasks solved vs speedup threshold (best sample per task)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    if with_sol:
        ax = axes[0][1]
        grid = [i / 200 for i in range(201)]
        for name in names:
            sols = best_sols(groups[name].tasks)
            if sols:
                n = len(groups[name].tasks)
                curve = [sum(x >= t for x in sols) / n for t in grid]
                ax.step(grid, curve, where="post", label=f"{name} ({len(sols)} of {n} scored)")
        ax.axvline(0.5, color="grey", linestyle=":", linewidth=1)
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel(f"SOL score (0.5 = {basis}, 1 = roofline bound)")
        ax.set_ylabel("fraction of tasks at or above")
        ax.set_title("best SOL score per task")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
