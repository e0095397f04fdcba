"""Reference side of the judge: job handlers of the clean reference ranks (a RankPool that never loads
candidate code). They draw inputs with the task's make_inputs under seeds the judge keeps secret
from the candidate, run the task's reference and oracle, and time the reference with the same
batches and fingerprints as the candidate (rankbatch). Everything goes back to the judge as bytes.

Jobs: judge_ref_setup (load the task from its source text), judge_ref_trial (a trial's inputs of
this rank, the reference's outputs and the expected outputs: the oracle, else the reference),
judge_ref_inputs (input sets for a list of seeds), judge_ref_outputs (the reference's outputs for
a list of seeds), judge_ref_batch (a timed batch of the reference).
"""

from __future__ import annotations

import random
from typing import Any

import torch

from mgbench.validation import oracle_parts
from mgbench.validation.checks import clone_tree
from mgbench.validation.contract import check_contract
from mgbench.validation.eval import timed
from mgbench.validation.eval.guard import load_source
from mgbench.validation.eval.judge import rankbatch, wire
from mgbench.validation.jobs import (
    JudgeBatchJob,
    JudgeRefInputsJob,
    JudgeRefOutputsJob,
    JudgeRefSetupJob,
    JudgeRefTrialJob,
)
from mgbench.validation.worker import RankContext, register

_TASK: dict[str, Any] = {}


def _task() -> Any:
    if "mod" not in _TASK:
        raise RuntimeError("judge_ref_setup must run first")
    return _TASK["mod"]


def _inputs(ctx: RankContext, seed: int, size: str, rank: int | None = None) -> tuple:
    r = ctx.rank if rank is None else rank
    return _task().make_inputs(r, ctx.world_size, seed=seed, device=ctx.device, size=size)


def _setup(job: JudgeRefSetupJob, ctx: RankContext) -> dict[str, Any]:
    mod = load_source(job.task_source, "<mgbench task>", register=False)
    check_contract(mod, "task", need_oracle=job.has_oracle)
    _TASK["mod"] = mod
    _TASK["split"] = oracle_parts.split_here(job.task_id, ctx.device)  # the attention oracles: heads in parts
    return {}


def _trial(job: JudgeRefTrialJob, ctx: RankContext) -> dict[str, Any]:
    mod, seed, size = _task(), job.seed, job.size
    if job.shape is not None:  # a held-out shape the judge drew (validation/eval/shapes.py)
        mod.SIZES[size] = dict(job.shape)
    inputs = _inputs(ctx, seed, size)
    sent = wire.encode(inputs)
    ref = mod.solution(*clone_tree(inputs))
    if job.has_oracle:
        every = [inputs if r == ctx.rank else _inputs(ctx, seed, size, r) for r in range(ctx.world_size)]
        expected = oracle_parts.solve(mod.oracle, every, ctx.world_size, _TASK.get("split"))[ctx.rank]
    else:
        expected = ref
    return {"inputs": sent, "reference": wire.encode(ref), "expected": wire.encode(expected)}


def _spec_inputs(ctx: RankContext, spec: list[int | None], size: str) -> tuple:
    """The input set of a spec [seed, decoy seed]: make_inputs under the seed; a decoy also has two
    elements of every float tensor swapped, at positions from the decoy seed (the same on every rank)
    and the tensor's owner: the lowest rank whose input set under the seed holds an equal tensor at
    the same place (this rank draws the lower ranks' sets one at a time to find it; rank 0 draws none).
    Tensors replicated across ranks thus stay replicated, while a tensor that differs per rank is
    swapped at its own places on each rank, so no rank can answer the decoy from an earlier call's
    answer alone (validation/eval/timed.py)."""
    seed, decoy = spec
    inputs = _inputs(ctx, seed, size)
    if decoy is not None:
        own = timed.owners(inputs, ctx.rank, lambda r: _inputs(ctx, seed, size, r))
        timed.perturb(inputs, random.Random(decoy), own)
    return inputs


def _make(job: JudgeRefInputsJob, ctx: RankContext) -> dict[str, Any]:
    return {"sets": [wire.encode(_spec_inputs(ctx, s, job.size)) for s in job.specs]}


def _outputs(job: JudgeRefOutputsJob, ctx: RankContext) -> dict[str, Any]:
    mod = _task()
    return {"outputs": [wire.encode(mod.solution(*_spec_inputs(ctx, s, job.size))) for s in job.specs]}


def _batch(job: JudgeBatchJob, ctx: RankContext) -> dict[str, Any]:
    mod = _task()
    outs, reply = rankbatch.run(
        lambda args: mod.solution(*args), job.first, ctx, job.key, lambda o: rankbatch.plain_check(o, ctx.device)
    )
    del outs
    if ctx.device.type == "cuda":
        torch.cuda.synchronize(ctx.device)
    return reply


register(JudgeRefSetupJob, _setup)
register(JudgeRefTrialJob, _trial)
register(JudgeRefInputsJob, _make)
register(JudgeRefOutputsJob, _outputs)
register(JudgeBatchJob, _batch)
