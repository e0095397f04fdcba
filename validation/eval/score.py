"""`mgbench score`: metrics over eval results (JSONL), broken down by level and parallelism dimension,
and a plot of the fraction of tasks solved versus the required speedup."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from validation.eval import metrics
from validation.eval.metrics import Sample
from validation.report import table
from validation.store import read_jsonl

FAST_PS = (1.0, 1.5, 2.0)


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


def to_sample(r: dict[str, Any], basis: str, exclude_flagged: bool) -> Sample:
    correct = bool(r.get("correct")) and not (exclude_flagged and r.get("review"))
    sp = (r.get("speedups") or {}).get(basis) if basis != "reference" else r.get("speedup")
    if sp is None and basis != "reference":
        sp = next((v for k, v in (r.get("speedups") or {}).items() if k.split("@")[0] == basis), None)
    return Sample(correct, sp, r.get("roofline_fraction"))


@dataclass
class Group:
    name: str
    tasks: dict[str, list[Sample]] = field(default_factory=dict)


def group_by(results: list[dict[str, Any]], basis: str, exclude_flagged: bool) -> dict[str, Group]:
    """Groups "all", "level N" and "dim X" (a task with several dims counts in each)."""
    groups: dict[str, Group] = {}
    for r in results:
        s = to_sample(r, basis, exclude_flagged)
        keys = ["all", f"level {r.get('level', '?')}"] + [f"dim {d}" for d in (r.get("dims") or ["?"])]
        for k in keys:
            groups.setdefault(k, Group(k)).tasks.setdefault(r["task_id"], []).append(s)
    return groups


def group_metrics(g: Group, ks: list[int]) -> dict[str, Any]:
    samples = [s for ss in g.tasks.values() for s in ss]
    sp = metrics.correct_speedups(samples)
    roof = [s.roofline_fraction for s in samples if s.correct and s.roofline_fraction is not None]
    m: dict[str, Any] = {"tasks": len(g.tasks), "samples": len(samples),
                         "correct": sum(s.correct for s in samples)}
    for k in ks:
        m[f"pass@{k}"] = metrics.mean_over_tasks(g.tasks, k)
        for p in FAST_PS:
            m[f"fast_{p:g}@{k}"] = metrics.mean_over_tasks(g.tasks, k, p)
    m["geomean_speedup"] = metrics.geomean(sp)
    m["geomean_best_speedup"] = metrics.geomean(b for ss in g.tasks.values()
                                                if (b := metrics.best_speedup(ss)) is not None)
    m["mean_roofline_fraction"] = sum(roof) / len(roof) if roof else None
    return m


def default_ks(results: list[dict[str, Any]]) -> list[int]:
    per_task: dict[str, int] = {}
    for r in results:
        per_task[r["task_id"]] = per_task.get(r["task_id"], 0) + 1
    n_max = max(per_task.values(), default=1)
    return [k for k in (1, 5, 10, 100) if k <= n_max] or [1]


def score(paths: list[str], ks: list[int] | None = None, basis: str = "reference",
          exclude_flagged: bool = False) -> tuple[dict[str, dict[str, Any]], dict[str, Group]]:
    results = latest_results(paths)
    if not results:
        raise ValueError("no eval results in " + ", ".join(map(str, paths)))
    ks = ks or default_ks(results)
    groups = group_by(results, basis, exclude_flagged)
    order = sorted(groups, key=lambda k: (k != "all", not k.startswith("level"), k))
    return {k: group_metrics(groups[k], ks) for k in order}, groups


def format_table(summary: dict[str, dict[str, Any]]) -> str:
    cols = list(next(iter(summary.values())).keys())
    rows = [[name] + [("-" if v is None else round(v, 4) if isinstance(v, float) else v) for v in m.values()]
            for name, m in summary.items()]
    return table(rows, ["group"] + cols)


def plot(groups: dict[str, Group], path: Path | str, basis: str) -> Path:
    """PNG: fraction of tasks solved (a correct sample at >= threshold speedup) vs the threshold."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    names = ["all"] + sorted(k for k in groups if k.startswith("level"))
    ths = metrics.thresholds_for(groups["all"].tasks)
    for name in names:
        ax.step(ths, metrics.solved_curve(groups[name].tasks, ths), where="post",
                label=f"{name} ({len(groups[name].tasks)} tasks)", linewidth=2 if name == "all" else 1)
    ax.axvline(1.0, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel(f"required speedup over {basis} (log scale)")
    ax.set_ylabel("fraction of tasks solved")
    ax.set_title("mgbench: tasks solved vs speedup threshold (best sample per task)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
