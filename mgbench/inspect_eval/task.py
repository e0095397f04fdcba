"""The Inspect task `mgbench/mgbench`: prompts from an mgbench dataset, a protocol, mgbench eval scoring.

    inspect eval mgbench/mgbench --model openai/gpt-5 -T level=1 -T epochs=5
    inspect eval mgbench/mgbench --model anthropic/claude-sonnet-4-5 -T protocol=agent -T max_turns=12

Every argument is documented in docs/inspect.md.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from uuid import uuid4

from inspect_ai import Epochs, Task, task
from inspect_ai.scorer import pass_at

from mgbench.backends import BACKENDS
from mgbench.inspect_eval.evaluator import EvalSettings
from mgbench.inspect_eval.samples import DEFAULT_DATASET, as_list, load_samples, resolve_dataset
from mgbench.inspect_eval.scorer import mgbench_eval
from mgbench.inspect_eval.solvers import PROTOCOLS, agent, zero_shot

PASS_KS = (5, 10, 100)  # pass@k reported next to pass@1 when the epochs allow (as `mgbench score`)


def epochs_with_reducers(epochs: int) -> Epochs:
    """`epochs` samples per task, reduced by mean (pass@1) and pass_at(k) for k in 5, 10, 100 and
    k = epochs, those not above epochs."""
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1 (got {epochs})")
    ks = sorted({k for k in PASS_KS if k <= epochs} | ({epochs} if epochs > 1 else set()))
    return Epochs(epochs, ["mean"] + [pass_at(k) for k in ks])


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid4().hex[:8]


@task
def mgbench(
    dataset: str = DEFAULT_DATASET,
    split: str | None = None,
    level: str | None = None,
    task_ids: str | None = None,
    backend: str = "cuda",
    protocol: str = "zero_shot",
    epochs: int = 1,
    world_size: int = 2,
    hardware: str | None = None,
    eval_backend: str = "auto",
    size: str | None = None,
    trials: int = 5,
    timing: bool = True,
    timing_budget: float = 1.0,
    min_iters: int = 50,
    eval_timeout: float | None = None,
    max_evals: int | None = None,
    baselines: str | None = None,
    max_turns: int = 10,
    agent_time_limit: float | None = 1800.0,
    out: str = "mgbench-inspect",
    results: str | None = None,
) -> Task:
    """mgbench: rewrite a multi-GPU PyTorch reference into faster code; scored by `mgbench eval`.

    Args:
        dataset: dataset folder or Hugging Face Hub id (default: the folder `mgbench build` writes).
        split: dataset split (level1, level2, ...; default: every split).
        level: only these levels (one number or a comma-separated list).
        task_ids: only these task ids or shell patterns (comma-separated, e.g. "l1-all_reduce-*").
        backend: the prompt variant of the dataset (cuda, triton).
        protocol: zero_shot (one reply; with epochs > 1 this is parallel sampling) or agent.
        epochs: samples per task (pass@k over epochs).
        world_size: ranks of the evaluation (tasks not supporting it are left out).
        hardware: hardware tag of the recorded baselines to compare with (mgbench eval --hardware).
        baselines: more baselines.jsonl files, comma-separated (mgbench eval --baselines).
        eval_backend: auto (NCCL when enough GPUs are visible, else gloo), gloo, nccl or shared-gpu (the ranks
            share the visible GPUs over gloo on CUDA tensors: correctness only); mgbench eval's --backend.
        size: size class of the evaluation (default: smoke on gloo, full on NCCL).
        trials: correctness trials per evaluation, a fresh seed each.
        timing: time the candidate against the reference (off: correctness only, no speedup).
        timing_budget: seconds of timing per timed function.
        min_iters: timed iterations at least.
        eval_timeout: seconds per evaluation phase (default: 60 on gloo, 300 on NCCL).
        max_evals: concurrent evaluations (default: GPUs // world_size on NCCL, cores // (world_size + 1)
            on gloo).
        max_turns: agent: model turns at most.
        agent_time_limit: agent: seconds at most for the whole loop (its evaluations included).
        out: folder of the run folders (<out>/<run id>/ holds solutions/ and results.jsonl).
        results: results JSONL to append to instead of <out>/<run id>/results.jsonl.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol {protocol!r}: choose one of {', '.join(PROTOCOLS)}")
    if eval_backend != "auto" and eval_backend not in BACKENDS:
        raise ValueError(f"eval_backend {eval_backend!r}: choose one of auto, {', '.join(BACKENDS)}")
    spec = resolve_dataset(dataset)
    settings = EvalSettings(
        dataset=spec,
        world_size=world_size,
        backend=eval_backend,
        size=size,
        trials=trials,
        timing=timing,
        timing_budget=timing_budget,
        min_iters=min_iters,
        timeout=eval_timeout,
        hardware=hardware,
        max_evals=max_evals,
        baselines=[str(Path(b).resolve()) for b in as_list(baselines)],
    )
    run_id = new_run_id()
    folder = str((Path(out) / run_id).resolve())
    fields = asdict(settings)
    solver = zero_shot() if protocol == "zero_shot" else agent(fields, folder, max_turns, agent_time_limit)
    return Task(
        dataset=load_samples(spec, split, level, task_ids, backend, world_size),
        solver=solver,
        scorer=mgbench_eval(fields, folder, run_id, results, protocol),
        epochs=epochs_with_reducers(epochs),
        metadata={
            "mgbench_run": run_id,
            "run_folder": folder,
            "protocol": protocol,
            "prompt_backend": backend,
            "eval_backend": settings.resolved_backend(),
            "max_concurrent_evals": settings.concurrency(),
        },
    )
