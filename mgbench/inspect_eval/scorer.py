"""The mgbench scorer: `mgbench eval` on the final answer, in child processes, one results line each.

Every scored sample leaves two files in the run folder: solutions/<task_id>@e<epoch>-<id>.py (the
extracted answer under a header comment naming run, epoch, sample and model) and one line of
results.jsonl, written by `mgbench eval --results` itself, so `mgbench score results.jsonl` reads it
unchanged and `mgbench eval --solutions-dir solutions/` re-evaluates the same files. The header makes
each epoch's file distinct even when two replies are identical: `mgbench score` keys samples by file
hash, and Inspect counts every epoch, so both see the same n samples per task.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspect_ai.scorer import Score, Scorer, Target, scorer
from inspect_ai.solver import TaskState

from mgbench.evalchild import VERDICT_KEYS
from mgbench.inspect_eval.evaluator import EvalSettings, evaluate_file
from mgbench.inspect_eval.extract import extract_code
from mgbench.inspect_eval.metrics import rates, speedup
from mgbench.validation.eval.verdict import FAST_PS, Rules, Verdict, judge

NO_CODE = "no ```python code block in the final answer"
# What gets evaluated when the reply has no code: a file without solution(), so the sample is still
# one (incorrect) line of the results file and counts in `mgbench score` like in Inspect.
NO_CODE_FILE = "# the model's final answer held no ```python code block; nothing to evaluate\n"
# the sample's metadata: what the solver may see (evalchild.VERDICT_KEYS) and the judge's details
META_KEYS = (
    *VERDICT_KEYS,
    "noise_source",
    "hardware",
    "seed",
    "sample_hash",
    "max_error",
    "level",
    "dims",
    "tradeoffs",
    "family",
    "eval_wall_s",
)


@dataclass(frozen=True)
class RunFiles:
    """Where one Inspect run keeps its solution files and its results JSONL."""

    folder: Path
    results: Path
    run_id: str

    @classmethod
    def create(cls, folder: str | Path, run_id: str, results: str | Path | None = None) -> RunFiles:
        folder = Path(folder).resolve()
        return cls(folder, Path(results).resolve() if results else folder / "results.jsonl", run_id)

    def solution_path(self, state: TaskState) -> Path:
        return self.folder / "solutions" / f"{state.sample_id}@e{state.epoch}-{state.uuid[:10]}.py"


def header(run: RunFiles, state: TaskState, protocol: str) -> str:
    return (
        f"# mgbench inspect sample: run {run.run_id}, task {state.sample_id}, epoch {state.epoch}, "
        f"sample {state.uuid}, model {state.model}, protocol {protocol}\n"
    )


NOT_COUNTED = float("nan")  # a key that does not apply to a sample: Inspect's reducers skip NaN


def verdict_of(rec: dict[str, Any], rules: Rules | None = None) -> Verdict:
    """What the record counts for, by the one scoring rule `mgbench score` and the RL reward use."""
    return judge([rec], rules or Rules())


def score_value(v: Verdict) -> dict[str, float]:
    """{"pass": counted correct, "fast_<p>": counted correct and faster than p, "timed": its speed counts,
    "sol": the SOL score (NaN where undefined, so Inspect's reducers skip it as `mgbench score` does)}.
    The rates metric reports a group's fast_p only where some sample's "timed" is set, as `mgbench
    score` reports fast_p only for groups with a sample whose speed counts."""
    value: dict[str, float] = {"pass": float(v.counted_correct)}
    value.update({f"fast_{p:g}": float(v.fast(p)) for p in FAST_PS})
    value["timed"] = float(v.timed)
    value["sol"] = NOT_COUNTED if v.sol_score is None else v.sol_score
    return value


def to_score(rec: dict[str, Any], code: str | None, run: RunFiles, path: Path) -> Score:
    v = verdict_of(rec)
    meta = {k: rec.get(k) for k in META_KEYS}
    meta.update(
        counted_correct=v.counted_correct,
        counted_speedup=v.counted_speedup,
        sol_score=v.sol_score,
        excluded=v.excluded,
    )
    meta.update(results_file=str(run.results), solution_file=str(path), answer_found=code is not None)
    if code is None:
        explanation = NO_CODE
    elif rec.get("correct"):
        sp = rec.get("speedup")
        explanation = "correct" + (f", speedup {sp:.3g}x over the reference" if sp else " (not timed)")
        if sp and v.counted_speedup is None and v.counted_correct:
            # the speed the record measured but the scoring rule does not count (host-staged or CPU timings)
            explanation += "; not counted: " + "; ".join(v.excluded)
    else:
        explanation = f"{rec.get('status')}: {rec.get('reason')}"
    return Score(value=score_value(v), answer=code, explanation=explanation, metadata=meta)


@scorer(metrics=[rates(), speedup()])
def mgbench_eval(
    settings: dict[str, Any], folder: str, run_id: str, results: str | None = None, protocol: str = "zero_shot"
) -> Scorer:
    """Score the final answer with `mgbench eval` (static checks, fresh rank processes, correctness
    trials, timing); `settings` are EvalSettings fields, `folder` the run folder."""
    cfg = EvalSettings(**settings)
    run = RunFiles.create(folder, run_id, results)

    async def score(state: TaskState, target: Target) -> Score:
        code = extract_code(state.output.completion if state.output else None)
        path = run.solution_path(state)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(header(run, state, protocol) + (code if code is not None else NO_CODE_FILE))
        rec = await evaluate_file(cfg, str(state.sample_id), path, run.results)
        return to_score(rec, code, run, path)

    return score
