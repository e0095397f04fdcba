"""What `mgbench score` counts: suspicious speed is a verdict (neither passed nor fast unless opted in),
a speedup within the noise floor counts as none, CPU/gloo/smoke timings stay out of fast_p unless
asked, a sample is correct only at every world size it was judged at; the JSON says why per sample."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.store import append_jsonl
from mgbench.validation.eval.score import score_report
from mgbench.validation.eval.verdict import Rules

GPU = {"backend": "nccl", "size": "full", "hardware": "2x NVIDIA H200"}
CPU = {"backend": "gloo", "size": "smoke", "hardware": "x86_64 cpu"}


def rec(
    task: str,
    sample: str,
    speedup: float | None,
    correct: bool = True,
    ws: int = 2,
    flags: list[str] | None = None,
    within: bool = False,
    where: dict | None = None,
    **extra,
) -> dict:
    return {
        "task_id": task,
        "sample": sample,
        "sample_hash": f"h-{task}-{sample}",
        "world_size": ws,
        **(where or GPU),
        "level": 1,
        "dims": ["collective"],
        "status": "correct" if correct else "incorrect",
        "correct": correct,
        "speedup": speedup,
        "speedups": {"reference": speedup} if speedup else {},
        "within_noise": within,
        "noise_floor": 1.05,
        "flags": flags or [],
        "review": any(f.startswith("review") for f in flags or []),
        "roofline_fraction": None,
        **extra,
    }


def report(tmp_path, records: list[dict], name: str = "results", **rules):
    path = tmp_path / f"{name}.jsonl"
    for r in records:
        append_jsonl(path, r)
    return score_report([str(path)], [1], rules=Rules(**rules))


SANITY = "review: speedup 40x exceeds the sanity bound 10x"
ROOF = "review: 0.01 ms is faster than the roofline bound 0.02 ms"


@pytest.mark.parametrize("flag, why", [(SANITY, "sanity bound"), (ROOF, "roofline bound")])
def test_suspicious_speed_counts_as_neither_passed_nor_fast_unless_accepted(tmp_path, flag, why):
    recs = [rec("t1", "a", 40.0, flags=[flag])]
    rep = report(tmp_path, recs)
    m = rep.summary["all"]
    assert m["pass@1"] == 0.0 and m["fast_1@1"] == 0.0 and m["geomean_speedup"] is None
    (v,) = rep.verdicts
    assert v.correct and not v.counted_correct and v.counted_speedup is None
    assert any(why in e and "--accept-suspicious" in e for e in v.excluded), v.excluded
    assert any("suspicious" in w for w in rep.warnings)
    accepted = report(tmp_path, recs, "accepted", accept_suspicious=True)
    assert accepted.summary["all"]["pass@1"] == 1.0 and accepted.summary["all"]["fast_2@1"] == 1.0


def test_a_record_marked_suspicious_by_eval_is_a_verdict_too(tmp_path):
    rep = report(tmp_path, [rec("t1", "a", 3.0, suspicious=["output served from a cache"])])
    (v,) = rep.verdicts
    assert not v.counted_correct and any("served from a cache" in e for e in v.excluded)


def test_a_speedup_within_the_noise_floor_counts_as_none(tmp_path):
    rep = report(tmp_path, [rec("t1", "a", 1.04, within=True), rec("t2", "a", 1.6)])
    m = rep.summary["all"]
    assert m["pass@1"] == 1.0
    assert m["fast_1@1"] == pytest.approx(0.5)  # t1's 1.04x is no speedup
    assert m["geomean_speedup"] == pytest.approx((1.0 * 1.6) ** 0.5)
    noisy = next(v for v in rep.verdicts if v.task_id == "t1")
    assert noisy.counted_speedup == 1.0 and any("noise floor" in e for e in noisy.excluded)


def test_cpu_timings_stay_out_of_fast_p_and_are_announced(tmp_path):
    recs = [rec("t1", "a", 10.2, where=CPU), rec("t1", "b", 0.195, where=CPU)]
    rep = report(tmp_path, recs)
    m = rep.summary["all"]
    assert m["pass@1"] == 1.0  # correctness on gloo counts
    assert m["fast_1@1"] is None and m["geomean_speedup"] is None
    assert any("CPU/gloo/shared-GPU/smoke" in w and "not results" in w for w in rep.warnings)
    assert all(any("--count-cpu-timings" in e for e in v.excluded) for v in rep.verdicts)
    counted = report(tmp_path, recs, "counted", count_cpu_timings=True)
    assert counted.summary["all"]["fast_1@1"] == pytest.approx(0.5)


def test_a_sample_is_correct_only_at_every_world_size_it_was_judged_at(tmp_path):
    recs = [
        rec("t1", "a", 1.5, ws=2),
        rec("t1", "a", None, correct=False, ws=4),
        rec("t2", "a", 1.8, ws=2),
        rec("t2", "a", 1.3, ws=4),
    ]
    rep = report(tmp_path, recs)
    assert rep.summary["all"]["samples"] == 2 and rep.summary["all"]["pass@1"] == pytest.approx(0.5)
    by = {v.task_id: v for v in rep.verdicts}
    assert not by["t1"].counted_correct and "world size 4" in by["t1"].excluded[0]
    assert by["t2"].world_sizes == [2, 4] and by["t2"].counted_speedup == 1.3  # the slowest world size


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.05, 50.0), st.booleans(), st.booleans(), st.booleans()), min_size=1, max_size=8))
def test_no_excluded_sample_ever_raises_a_figure(tmp_path_factory, samples):
    """Adding suspicious, CPU-timed or noise-floor samples never raises fast_p above what the clean
    samples alone give (per task, one sample each)."""
    recs, clean = [], []
    for i, (sp, sus, cpu, noise) in enumerate(samples):
        r = rec(f"t{i}", "a", sp, flags=[SANITY] if sus else [], where=CPU if cpu else GPU, within=noise)
        recs.append(r)
        clean.append(r if not (sus or cpu or noise) else rec(f"t{i}", "a", None, correct=False))
    got = report(tmp_path_factory.mktemp("a"), recs).summary["all"]
    ref = report(tmp_path_factory.mktemp("b"), clean).summary["all"]
    for p in ("1", "1.5", "2"):
        assert (got[f"fast_{p}@1"] or 0.0) <= (ref[f"fast_{p}@1"] or 0.0) + 1e-12


def test_score_json_names_the_reason_per_sample(tmp_path, capsys):
    from mgbench.cli import main

    path = tmp_path / "r.jsonl"
    for r in (rec("t1", "a", 40.0, flags=[SANITY]), rec("t2", "a", 1.2, where=CPU)):
        append_jsonl(path, r)
    assert main(["score", str(path), "--json", "--plot", str(tmp_path / "p.png")]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    why = {s["task_id"]: s["excluded"] for s in doc["samples"]}
    assert any("sanity bound" in e for e in why["t1"]) and any("CPU" in e for e in why["t2"])
    assert "WARNING:" in out.err and doc["warnings"]


def test_eval_marks_only_speed_doubts_as_suspicious():
    """The eval record's `suspicious` list carries what its flags do not (threads left running,
    unverified timed calls); a static review finding is not about speed and leaves a correct
    sample counted (score --exclude-flagged is its switch), and speed flags are not doubled."""
    from mgbench.validation.eval.runner import suspicious

    base = {
        "flags": ["review: static: line 3: uses torch.cuda.Stream (rule side_stream)", SANITY],
        "timing": {"candidate_timed_checks": {"calls": 40, "verified": 9}},
    }
    assert suspicious(base) == []
    threads = {
        **base,
        "flags": base["flags"] + ["solution() left 1 thread(s) running after it returned: t"],
        "timing": {"candidate_timed_checks": {"calls": 40, "verified": 1}},
    }
    why = suspicious(threads)
    assert len(why) == 2 and "thread(s) running" in why[0] and "1 timed call(s) verified" in why[1]


def test_a_static_review_flag_alone_keeps_a_correct_sample_passed(tmp_path):
    rep = report(tmp_path, [rec("t1", "a", 1.5, flags=["review: static: something to look at"])])
    assert rep.summary["all"]["pass@1"] == 1.0


def test_score_json_breaks_pass_and_fast_down_by_tradeoff(tmp_path, capsys):
    """Records carrying trade-off tags (TaskInfo.tags()) count in a "tradeoff T" group per tag, as dims
    do; a record from before the tags counts in none."""
    from mgbench.cli import main

    path = tmp_path / "r.jsonl"
    for r in (
        rec("t1", "a", 2.0, tradeoffs=["overlap", "transfer.tma"]),
        rec("t2", "a", None, correct=False, tradeoffs=["overlap"]),
        rec("t3", "a", 1.2),
    ):
        append_jsonl(path, r)
    assert main(["score", str(path), "--json", "--k", "1", "--plot", str(tmp_path / "p.png")]) == 0
    groups = json.loads(capsys.readouterr().out)["groups"]
    trade = {k: v for k, v in groups.items() if k.startswith("tradeoff ")}
    assert set(trade) == {"tradeoff overlap", "tradeoff transfer.tma"}
    assert trade["tradeoff overlap"]["tasks"] == 2 and trade["tradeoff overlap"]["pass@1"] == 0.5
    assert trade["tradeoff overlap"]["fast_1.5@1"] == 0.5 and trade["tradeoff transfer.tma"]["fast_1.5@1"] == 1.0
    assert groups["all"]["tasks"] == 3 and list(groups).index("dim collective") < list(groups).index("tradeoff overlap")
