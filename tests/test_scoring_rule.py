"""One scoring rule for every path: the same results file gives `mgbench score` and the Inspect scorer and
metrics the same pass@k, fast_p@k, geometric-mean speedup and SOL score (both count records through
mgbench.validation.eval.verdict.judge), and the SOL score's edges are defined."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.sol import sol_score
from mgbench.store import append_jsonl
from mgbench.validation.eval.score import score_report
from mgbench.validation.eval.verdict import Rules, judge

pytest.importorskip("inspect_ai", reason="inspect_ai is not installed (pip install -e '.[inspect]')")

GPU = {"backend": "nccl", "size": "full", "hardware": "2x NVIDIA H200"}
GLOO = {"backend": "gloo", "size": "smoke", "hardware": "x86_64 cpu"}
SANITY = "review: speedup 40x exceeds the sanity bound 10x"


def record(task: str, sample: str, where: dict, correct: bool, speedup: float | None, **extra) -> dict:
    cand_ms = 1.0
    return {
        "task_id": task,
        "sample": sample,
        "sample_hash": f"h-{task}-{sample}",
        "world_size": 2,
        **where,
        "level": int(task[1]),
        "dims": ["collective"],
        "status": "correct" if correct else "incorrect",
        "correct": correct,
        "reason": "" if correct else "trial 1: wrong output",
        "speedup": speedup if correct else None,
        "speedups": {"reference": speedup} if correct and speedup else {},
        "timing": {"candidate": {"median_ms": cand_ms}} if correct and speedup else None,
        "timing_on": True,
        "flags": [],
        "within_noise": False,
        "roofline_fraction": None,
        **extra,
    }


def inspect_metrics(records: list[dict], reducer: str) -> dict[str, float]:
    """What Inspect reports for these records: each one through the scorer's own Score (to_score), the
    task's epochs through Inspect's reducer, then the task's metrics."""
    from inspect_ai.scorer import SampleScore, mean_score, pass_at

    from mgbench.inspect_eval.metrics import rates, speedup
    from mgbench.inspect_eval.scorer import RunFiles, to_score

    run = RunFiles.create("/tmp/none", "run")
    scores = {}
    for r in records:
        s = to_score(r, "code", run, run.folder / "x.py")
        scores.setdefault(r["task_id"], []).append(s)
    red = mean_score() if reducer == "mean" else pass_at(int(reducer.rsplit("_", 1)[1]))
    meta = {t: {"level": ss[0].metadata["level"], "dims": ss[0].metadata["dims"]} for t, ss in scores.items()}
    reduced = [SampleScore(score=red(ss), sample_id=t, sample_metadata=meta[t]) for t, ss in scores.items()]
    unreduced = [SampleScore(score=s, sample_id=t, sample_metadata=meta[t]) for t, ss in scores.items() for s in ss]
    return {**rates()(reduced), **speedup()(unreduced)}


def score_figures(tmp_path, records: list[dict], k: int) -> dict:
    path = tmp_path / "results.jsonl"
    path.unlink(missing_ok=True)
    for r in records:
        append_jsonl(path, r)
    return score_report([str(path)], [k], rules=Rules()).summary


def assert_same(inspect: dict[str, float], score: dict, k: int) -> None:
    """Every figure of `mgbench score` equals Inspect's; a None figure is one Inspect does not report."""
    for group, m in score.items():
        prefix = "" if group == "all" else f"{group}/"
        pairs = {f"pass@{k}": "pass", "geomean_speedup": "geomean_speedup"}
        pairs.update({f"fast_{p}@{k}": f"fast_{p}" for p in ("1", "1.5", "2")})
        if k == 1:
            pairs["sol_score"] = "sol"
        for ours, theirs in pairs.items():
            got = inspect.get(prefix + theirs)
            if m[ours] is None:
                assert got is None or math.isnan(got), (group, ours, got)
            else:
                assert got == pytest.approx(m[ours]), (group, ours, got, m[ours])


def test_the_smoke_run_on_gloo_reports_no_speed_in_either(tmp_path):
    """The measured case: two copies of the reference on gloo at smoke size, speedups 0.83 and 1.05
    within the noise floor. Inspect used to report fast_1 = 0.5 and a geometric mean of 0.934 while
    `mgbench score` reported neither; both must report pass@1 = 1 and no speed figure."""
    recs = [
        record("l1-a", "s", GLOO, True, 0.83, within_noise=True, noise_floor=1.3),
        record("l1-b", "s", GLOO, True, 1.05, within_noise=True, noise_floor=1.3),
    ]
    score = score_figures(tmp_path, recs, 1)
    got = inspect_metrics(recs, "mean")
    assert score["all"]["pass@1"] == 1.0 and got["pass"] == 1.0
    assert score["all"]["fast_1@1"] is None and "fast_1" not in got
    assert score["all"]["geomean_speedup"] is None and "geomean_speedup" not in got
    assert_same(got, score, 1)


OUTCOMES = st.sampled_from(["correct", "incorrect", "noise", "suspicious", "bounded", "gloo"])


def make(task: str, i: int, kind: str, speedup: float) -> dict:
    if kind == "incorrect":
        return record(task, f"s{i}", GPU, False, None)
    if kind == "gloo":
        return record(task, f"s{i}", GLOO, True, speedup)
    extra: dict = {}
    if kind == "noise":
        extra = {"within_noise": True}
    if kind == "suspicious":
        extra = {"flags": [SANITY], "review": True}
    if kind == "bounded":  # a roofline bound of 0.3 of the candidate's time
        extra = {"roofline_ms": 0.3, "roofline_fraction": 0.3}
    return record(task, f"s{i}", GPU, True, speedup, **extra)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(OUTCOMES, st.floats(0.3, 3.0)), min_size=2, max_size=2),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from([1, 2]),
)
def test_inspect_and_score_agree_on_any_results_file(tmp_path_factory, per_task, k):
    """Random mixes of correct, incorrect, noise-floor, suspicious, roofline-bounded and CPU-timed
    samples, two epochs per task: pass@k, fast_p@k, geomean and the SOL score agree."""
    recs = [
        make(f"l{1 + t % 2}-t{t}", i, kind, sp)
        for t, samples in enumerate(per_task)
        for i, (kind, sp) in enumerate(samples)
    ]
    tmp = tmp_path_factory.mktemp("agree")
    score = score_figures(tmp, recs, k)
    got = inspect_metrics(recs, "mean" if k == 1 else f"pass_at_{k}")
    assert_same(got, score, k)


def test_the_inspect_log_and_score_agree_on_the_run_results(tmp_path):
    """End to end: the Inspect task with the scripted reference model (gloo, smoke, timed) and
    `mgbench score --json` on the results file the run wrote."""
    from tests.dataset_helpers import mgbench as mgbench_cli
    from tests.inspect_helpers import build_dataset, metrics, output, reply, run, scripted_model, task_of

    dataset = build_dataset(tmp_path / "ds")
    from mgbench.dataset.loader import load_tasks

    refs = {t.task_id: t.source for t in load_tasks(str(dataset))}
    tids = ["l1-all_reduce-max-bw-bf16", "l1-all_reduce-sum-bw-bf16"]

    def script(msgs, tools):
        return output(reply(refs[task_of(msgs)]))

    from mgbench.inspect_eval.task import mgbench as mgbench_task

    task = mgbench_task(
        dataset=str(dataset),
        task_ids=",".join(tids),
        trials=1,
        timing=True,
        timing_budget=0.2,
        min_iters=5,
        max_evals=1,
        out=str(tmp_path / "runs"),
    )
    log = run(task, scripted_model(script), tmp_path / "logs")
    results = f"{log.eval.metadata['run_folder']}/results.jsonl"
    proc = mgbench_cli("score", results, "--k", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    groups = json.loads(proc.stdout)["groups"]
    got = metrics(log, "mean")
    assert groups["all"]["pass@1"] == 1.0 and got["pass"] == 1.0
    assert_same({**got, **metrics(log, None)}, groups, 1)


def test_sol_score_is_half_at_the_baseline_and_one_at_the_bound():
    assert sol_score(2.0, 2.0, 1.0).value == pytest.approx(0.5)
    assert sol_score(1.0, 2.0, 1.0).value == pytest.approx(1.0)
    assert sol_score(3.0, 2.0, 1.0).value == pytest.approx(1 / 3)


def test_sol_score_edges_are_undefined_not_one():
    assert sol_score(0.5, 2.0, 1.0).value is None  # under the bound: suspicious, never 1
    assert "suspicious" in sol_score(0.5, 2.0, 1.0).why
    assert sol_score(1.0, 1.0, 1.0).value is None  # the baseline at its bound: no headroom
    assert sol_score(1.0, 0.8, 1.0).value is None
    assert sol_score(1.0, 2.0, None).value is None and "roofline" in sol_score(1.0, 2.0, None).why
    assert sol_score(None, 2.0, 1.0).value is None


@given(st.floats(0.01, 100.0), st.floats(0.01, 100.0), st.floats(0.001, 100.0))
def test_sol_score_is_bounded_and_falls_with_time(t, base, bound):
    s = sol_score(t, base, bound).value
    if s is not None:
        assert 0.0 < s <= 1.0
        slower = sol_score(t * 1.5, base, bound).value
        assert slower is not None and slower < s


def test_a_sample_faster_than_its_bound_scores_zero_not_one():
    r = record(
        "l1-a", "s", GPU, True, 4.0, roofline_ms=2.0, flags=["review: 1 ms is faster than the roofline bound 2 ms"]
    )
    v = judge([r], Rules())
    assert not v.counted_correct and v.sol_score == 0.0
    accepted = judge([r], Rules(accept_suspicious=True))
    assert accepted.sol_score == 1.0 and any("capped" in e for e in accepted.excluded)


def test_within_the_noise_floor_the_sol_score_is_the_baselines():
    r = record("l1-a", "s", GPU, True, 1.02, roofline_ms=0.5, within_noise=True)
    assert judge([r], Rules()).sol_score == pytest.approx(0.5)


def test_the_card_baseline_table_gives_each_baselines_sol_score():
    from mgbench.dataset.card_stats import baseline_summary

    def base(name: str, ms: float) -> dict:
        return {
            "hardware": "h200x2",
            "world_size": 2,
            "baseline": name,
            "status": "ok",
            "median_ms": ms,
            "roofline": {"bound_ms": 1.0},
            "fraction_of_roofline": 1.0 / ms,
            "noise_speedup_p95": 0.01,
        }

    rows = [{"baselines": [base("eager", 3.0), base("compile", 2.0)]}]
    table = baseline_summary(rows)
    assert "mean SOL score" in table.splitlines()[0]
    compile_row = next(line for line in table.splitlines() if "compile" in line)
    assert "| 0.6667 |" in compile_row  # 1 / (1 + (2 - 1) / (3 - 1))


def test_the_score_plot_adds_the_sol_panel_when_scores_exist(tmp_path):
    from PIL import Image

    from mgbench.validation.eval.score import plot

    recs = [record("l1-a", "s", GPU, True, 1.5, roofline_ms=0.3)]
    path = tmp_path / "r.jsonl"
    append_jsonl(path, recs[0])
    rep = score_report([str(path)], [1])
    assert rep.summary["all"]["sol_score"] == pytest.approx(sol_score(1.0, 1.5, 0.3).value)
    wide = Image.open(plot(rep.groups, tmp_path / "sol.png", "reference")).size[0]
    path2 = tmp_path / "r2.jsonl"
    append_jsonl(path2, record("l1-a", "s", GLOO, True, 1.5))
    narrow = Image.open(plot(score_report([str(path2)], [1]).groups, tmp_path / "no.png", "reference")).size[0]
    assert wide > narrow
