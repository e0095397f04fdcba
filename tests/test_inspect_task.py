"""The Inspect task end to end on gloo at smoke size, with Inspect's scripted mock model: correct,
wrong, cheating and code-less replies scored as such by the real `mgbench eval`; an agent that calls
evaluate() twice before submitting; the results JSONL read by `mgbench score` gives Inspect's pass@k."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("inspect_ai", reason="inspect_ai is not installed (pip install -e '.[inspect]')")

from tests.dataset_helpers import mgbench as mgbench_cli  # noqa: E402
from tests.inspect_helpers import (
    CHEAT_HEAD,
    WRONG_TAIL,
    build_dataset,
    metrics,  # noqa: E402
    output,
    reply,
    run,
    scripted_model,
    task_of,
)

# four tasks of the all_reduce family, each answered with one kind of reply
KINDS = {
    "l1-all_reduce-max-bw-bf16": "correct",
    "l1-all_reduce-max-lat-bf16": "wrong",
    "l1-all_reduce-sum-bw-bf16": "cheat",
    "l1-all_reduce-sum-lat-bf16": "no code",
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return build_dataset(tmp_path_factory.mktemp("inspect-ds"))


@pytest.fixture(scope="module")
def references(dataset):
    from mgbench.dataset.loader import load_tasks

    return {t.task_id: t.source for t in load_tasks(str(dataset))}


def answer(kind: str, ref: str) -> str | None:
    return {"correct": ref, "wrong": ref + WRONG_TAIL, "cheat": CHEAT_HEAD + ref, "no code": None}[kind]


def make_task(dataset, tmp_path, **kw):
    from mgbench.inspect_eval.task import mgbench as mgbench_task

    args = dict(dataset=str(dataset), trials=2, timing=False, max_evals=2, out=str(tmp_path / "runs"))
    return mgbench_task(**{**args, **kw})


def results_lines(log) -> list[dict]:
    folder = log.eval.metadata["run_folder"]
    with open(f"{folder}/results.jsonl") as f:
        return [json.loads(x) for x in f]


def test_scripted_replies_are_scored_correct_incorrect_with_reasons(dataset, references, tmp_path):
    def script(msgs, tools):
        tid = task_of(msgs)
        return output(reply(answer(KINDS[tid], references[tid])))

    task = make_task(dataset, tmp_path, task_ids=",".join(KINDS), timing=True, timing_budget=0.05, min_iters=5)
    model = scripted_model(script)
    log = run(task, model, tmp_path / "logs")
    scores = {s.id: s.scores["mgbench_eval"] for s in log.samples}
    assert {k: scores[k].value["pass"] for k in KINDS} == {k: int(v == "correct") for k, v in KINDS.items()}
    by_kind = {kind: scores[tid] for tid, kind in KINDS.items()}
    assert by_kind["correct"].metadata["status"] == "correct"
    assert by_kind["correct"].metadata["speedup"] > 0  # timed against the reference in the same run
    assert by_kind["wrong"].metadata["status"] == "incorrect"
    assert by_kind["wrong"].metadata["phase"].startswith("trial")
    assert by_kind["cheat"].metadata["phase"] == "static"
    assert "validation" in by_kind["cheat"].explanation
    assert by_kind["no code"].explanation.startswith("no ```python code block")
    assert by_kind["no code"].answer is None and by_kind["no code"].metadata["answer_found"] is False
    m = metrics(log, "mean")
    assert m["pass"] == pytest.approx(0.25) and m["level 1/pass"] == pytest.approx(0.25)
    # gloo timings are not results: the one scoring rule reports no speed figure (as `mgbench score`)
    assert "geomean_speedup" not in metrics(log, None) and "fast_1" not in m
    lines = {r["task_id"]: r for r in results_lines(log)}
    assert {t: r["correct"] for t, r in lines.items()} == {k: v == "correct" for k, v in KINDS.items()}


def test_agent_evaluates_twice_then_submits(dataset, references, tmp_path):
    from inspect_ai.model import ChatMessageTool

    tid = "l1-all_reduce-max-bw-bf16"
    ref = references[tid]

    def script(msgs, tools):
        assert {t.name for t in tools} == {"evaluate", "submit"}
        done = sum(isinstance(m, ChatMessageTool) and m.function == "evaluate" for m in msgs)
        if done == 0:
            return output(tool=("evaluate", {"code": ref + WRONG_TAIL}))
        if done == 1:
            return output(tool=("evaluate", {"code": f"```python\n{ref}```"}))
        return output(tool=("submit", {"code": ref}))

    task = make_task(dataset, tmp_path, task_ids=tid, protocol="agent")
    log = run(task, scripted_model(script), tmp_path / "logs")
    sample = log.samples[0]
    verdicts = [
        json.loads(m.text) for m in sample.messages if isinstance(m, ChatMessageTool) and m.function == "evaluate"
    ]
    assert [v["status"] for v in verdicts] == ["incorrect", "correct"]
    assert "trial" in verdicts[0]["reason"]
    assert sample.scores["mgbench_eval"].value["pass"] == 1
    assert [r["task_id"] for r in results_lines(log)] == [tid]  # only the submitted answer is recorded


def test_pass_at_k_over_epochs_equals_mgbench_score_on_the_results_file(dataset, references, tmp_path):
    # per task, the i-th reply (whichever epoch asks first): A right then wrong, B wrong twice
    plan = {"l1-all_reduce-max-bw-bf16": ["correct", "wrong"], "l1-all_reduce-sum-bw-bf16": ["wrong", "wrong"]}
    asked: dict[str, int] = {}

    def script(msgs, tools):
        tid = task_of(msgs)
        i = asked[tid] = asked.get(tid, -1) + 1
        return output(reply(answer(plan[tid][i], references[tid])))

    task = make_task(dataset, tmp_path, task_ids=",".join(plan), epochs=2, trials=1)
    log = run(task, scripted_model(script), tmp_path / "logs")
    results = f"{log.eval.metadata['run_folder']}/results.jsonl"
    proc = mgbench_cli("score", results, "--k", "1", "--k", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    groups = json.loads(proc.stdout)["groups"]
    assert groups["all"]["samples"] == 4 and groups["all"]["correct"] == 1
    for reducer, k in (("mean", 1), ("pass_at_2", 2)):
        m = metrics(log, reducer)
        for group in ("all", "level 1", "dim collective"):
            key = "pass" if group == "all" else f"{group}/pass"
            assert m[key] == pytest.approx(groups[group][f"pass@{k}"])
    assert metrics(log, "mean")["pass"] == pytest.approx(0.25)
    assert metrics(log, "pass_at_2")["pass"] == pytest.approx(0.5)


def test_agent_stops_at_its_turn_budget_and_is_scored_on_its_last_reply(dataset, tmp_path):
    calls: list[int] = []

    def script(msgs, tools):  # never calls a tool, never submits
        calls.append(1)
        return output("Let me think about the ring schedule some more.")

    task = make_task(dataset, tmp_path, task_ids="l1-all_reduce-max-bw-bf16", protocol="agent", max_turns=3)
    log = run(task, scripted_model(script), tmp_path / "logs")
    from inspect_ai.model import ChatMessageAssistant

    score = log.samples[0].scores["mgbench_eval"]
    # Inspect's turn_limit(3) trips on the 4th generation and drops it: 3 replies in the transcript
    assert len(calls) == 4
    assert sum(isinstance(m, ChatMessageAssistant) for m in log.samples[0].messages) == 3
    assert score.value["pass"] == 0 and score.explanation.startswith("no ```python code block")
    assert len(results_lines(log)) == 1  # still one (incorrect) sample for mgbench score
