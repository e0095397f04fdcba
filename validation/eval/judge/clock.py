"""The judge's clock: the time of a side (reference or candidate) measured in the judge process over
synchronized batches of calls on inputs drawn with the judge's secret seeds.

A batch: the reference ranks draw k input sets per rank (secret seeds, outside the clock; k varies
from batch to batch, drawn by the judge around the size the warm-up chose); the judge starts its clock
and sends each rank its first set and a fresh key; each rank makes the call and answers with the
fingerprints of the output and of the inputs as they are when the call returned, and only then gets
its next set, until the judge sends the end; the clock stops when the last rank has answered after its
last call (rankbatch). Time per call = batch time / k. The statistics are computed here, in the judge,
with this process's own `statistics` module.

After each candidate batch, outside the clock, the judge (with its own random generator) picks a
call (and takes the batch's last one and its decoy), asks the candidate's ranks for their full
outputs, checks them against the fingerprints they committed when each call returned, and keeps
them; after the job the clean reference ranks compute the reference's outputs on those calls'
inputs and the judge compares (verify.check_timed). Every call's input fingerprints are checked
against the judge's own copy of what it sent.
"""

from __future__ import annotations

import math
import pickle
import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mgbench.validation.compare import Tolerance
from mgbench.validation.eval import outcome, rankchecks
from mgbench.validation.eval.judge import verify, wire
from mgbench.validation.jobs import (
    JudgeBatchJob,
    JudgeCandBatchJob,
    JudgeCandRevealJob,
    JudgeRefInputsJob,
    JudgeRefOutputsJob,
)
from mgbench.validation.pool import JobOutcome, RankPool
from mgbench.validation.timing import summarize

BATCH_S = 0.01  # a batch lasts about this long on the judge's clock (k is sized from the warm-up)
MAX_CALLS = 64  # calls per batch at most (every call has its own input set)
MIN_BATCHES, MAX_BATCHES = 10, 40  # timed batches per timing job
SIZING = (1, 2, 8)  # warm-up batch sizes that estimate the time per call
MIN_VARIED = 2  # batches of k >= this many calls vary in length (Plan.batch_len)
# A timed batch may last at most this many times the reference's (sized at the warm-up), and never less than
# MIN_BATCH_BOUND_S: ranks that fell out of step (one waits in a collective the others never join, which
# streamed calls let happen) are timed out then, not at --timeout; a candidate this much slower gets nothing.
SLOWER_BOUND = 1000
MIN_BATCH_BOUND_S = 10.0


class Rejected(Exception):
    """A verdict reached while timing: (status, reason)."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclass
class Plan:
    size: str
    timeout_s: float
    budget_s: float
    min_iters: int
    device_type: str
    k: int = 1
    rng: random.Random = field(default_factory=lambda: random.Random(secrets.randbits(64)))
    batch_bound_s: float | None = None  # set by size_batches (SLOWER_BOUND)

    def batch_timeout_s(self) -> float:
        return min(self.timeout_s, self.batch_bound_s) if self.batch_bound_s else self.timeout_s

    def batch_len(self) -> int:
        """The number of calls of the next batch, drawn by the judge: from k/2 to 3k/2 (at least 2 to 3), so a
        candidate cannot count on where a batch ends (work deferred to a batch's last call is left undone
        when the batch ends sooner, and its unfinished outputs are fingerprinted)."""
        if self.k < MIN_VARIED:
            return self.k
        return self.rng.randint(max(2, self.k // 2), min(MAX_CALLS, self.k + self.k // 2))


@dataclass
class SideRun:
    """What one timing job of one side produced."""

    per_call_ms: list[float] = field(default_factory=list)
    calls: int = 0
    verified: int = 0
    device_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0


def _ok(oc: JobOutcome, phase: str) -> list[dict[str, Any]]:
    status, why = outcome.classify(oc, phase)
    if status != "ok":
        raise Rejected(status, why)
    return outcome.rank_results(oc)


def specs_for(k: int) -> tuple[list[list[int | None]], int | None]:
    """k input specs [seed, decoy seed] with fresh secret seeds; from k = 2 on, one of them (the
    decoy, its index returned) repeats an earlier call's seed with two elements of every float tensor
    swapped: a candidate whose answer does not depend on all of its inputs (a cache keyed on
    pointers, shapes, samples or sums) serves the earlier answer there, and the decoy is verified.
    The swap is alike on every rank only for tensors that are alike (reference._spec_inputs): a
    tensor that differs per rank is swapped at its own places on each rank, so no rank can answer the
    decoy from the earlier answer without the other ranks' data."""
    specs: list[list[int | None]] = [[secrets.randbits(62), None] for _ in range(k)]
    if k < 2:
        return specs, None
    j2 = 1 + secrets.randbelow(k - 1)
    specs[j2] = [specs[secrets.randbelow(j2)][0], secrets.randbits(62)]
    return specs, j2


def draw_sets(ref: RankPool, plan: Plan, specs: list[list[int | None]]) -> list[list[Any]]:
    """Per rank, the input sets the reference ranks drew for `specs`."""
    oc = ref.run(JudgeRefInputsJob(specs=specs, size=plan.size), plan.timeout_s)
    res = _ok(oc, "drawing inputs (reference ranks)")
    return [r["sets"] for r in res]


def run_batch(
    pool: RankPool, job_type: type[JudgeBatchJob], sets: list[list[Any]], plan: Plan, phase: str
) -> tuple[float, int, list]:
    """One batch on `pool`, streamed (rankbatch): each rank gets its next input set only once it sent the
    fingerprints of its call before. Returns (seconds on the judge's clock, key, rank replies with the
    steps' fingerprints as lists: metas, out_digests, in_digests)."""
    key = secrets.randbits(62)
    jobs = [job_type(first=s[0], key=key) for s in sets]
    feeds = [[pickle.dumps(x) for x in s[1:]] for s in sets]  # pickled before the clock starts
    bound = plan.batch_timeout_s()
    oc = pool.run(jobs, bound, feeds=feeds)
    if oc.status == "timeout" and bound < plan.timeout_s:
        raise Rejected(
            "timeout",
            f"{phase}: a timed batch lasted over {bound:.0f}s, {SLOWER_BOUND}x the reference's ({oc.reason}): ranks "
            "out of step (a collective that not every rank joins) or a solution that much slower",
        )
    # the pool's own time from sending the jobs to the last reply: what a pool does after its job (the
    # candidate's clears its sandbox, runner.CandidatePool.run) stays off the clock
    res = _ok(oc, phase)
    return oc.seconds, key, [_with_steps(rep, steps) for rep, steps in zip(res, oc.steps)]


STEP_FIELDS = {"metas": "meta", "out_digests": "out", "in_digests": "inputs"}  # reply list <- step field


def _with_steps(rep: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
    """A rank's reply with its steps' fingerprints gathered; a step without them leaves the lists out
    (a rejection's reason is in the reply, else the missing fingerprints are a protocol rejection)."""
    rep = dict(rep)
    if all(all(f in st for f in STEP_FIELDS.values()) for st in steps):
        for name, f in STEP_FIELDS.items():
            rep[name] = [st[f] for st in steps]
    return rep


def _check_batch(
    res: list[dict[str, Any]], sets: list[list[Any]], key: int, contracts: list[Any], plan: Plan, first: int, phase: str
) -> None:
    """Rank reasons, the declared layout of every output, and every input unchanged (judge's copy)."""
    for r, rep in enumerate(res):
        if rep.get("reason"):
            raise Rejected("incorrect", f"{phase}: rank {r}: {rep['reason']}")
        metas, outs, ins = rep.get("metas"), rep.get("out_digests"), rep.get("in_digests")
        k = len(sets[r])
        if not (
            type(metas) is list
            and type(outs) is list
            and type(ins) is list
            and len(metas) == len(outs) == len(ins) == k
        ):
            raise Rejected(
                "incorrect",
                f"{phase}: rank {r}: " + rankchecks.rule("protocol", "the batch's fingerprints are missing"),
            )
        for j in range(k):
            why = verify.check_layout(metas[j], contracts[r], first + j + 1)
            if why:
                raise Rejected("incorrect", f"{phase}: rank {r}: {why}")
            if ins[j] != wire.digest_data(sets[r][j], key, plan.device_type):
                raise Rejected(
                    "incorrect",
                    f"{phase}: rank {r}: "
                    + rankchecks.rule(
                        "timed_inputs",
                        f"timed call {first + j + 1} modified its inputs (they are not what the judge sent)",
                    ),
                )


def time_side(
    which: str,
    pool: RankPool,
    ref: RankPool,
    plan: Plan,
    contracts: list[Any],
    tol: Tolerance | None,
    batches: int,
    warm: int = 1,
    on_batch: Callable[[int], None] | None = None,
) -> SideRun:
    """`warm` untimed then `batches` timed batches of about plan.k calls each (Plan.batch_len) of one side;
    the candidate's are verified (see the module docstring). Raises Rejected with the verdict."""
    cand = which == "candidate"
    job_type = JudgeCandBatchJob if cand else JudgeBatchJob
    run = SideRun()
    picked: list[tuple[int, list[int | None], list[Any]]] = []  # (call number, spec, revealed outputs per rank)
    t_start = time.perf_counter()
    for b in range(warm + batches):
        phase = f"timing ({which})"
        k = plan.batch_len()
        specs, decoy = specs_for(k)
        sets = draw_sets(ref, plan, specs)
        dt, key, res = run_batch(pool, job_type, sets, plan, phase)
        first = run.calls
        run.calls += k
        _check_batch(res, sets, key, contracts, plan, first, phase)
        if b >= warm:
            run.per_call_ms.append(dt * 1e3 / k)
            if plan.device_type == "cuda":
                run.device_ms.append(max(float(r.get("device_ms") or 0.0) for r in res) / k)
        if cand:  # picked now, by the judge, from outputs already fingerprinted; the last call too: work
            # deferred to a later call is left undone there whenever the batch ends before that call
            which = sorted({plan.rng.randrange(k), k - 1} | ({decoy} if decoy is not None else set()))
            got = _ok(pool.run(JudgeCandRevealJob(which=which), plan.batch_timeout_s()), phase)
            revealed: list[list[Any]] = [[] for _ in which]
            for r, rep in enumerate(got):
                if rep.get("reason"):
                    raise Rejected("incorrect", f"{phase}: rank {r}: {rep['reason']}")
                outs = rep.get("outputs")
                if type(outs) is not list or len(outs) != len(which):
                    raise Rejected(
                        "incorrect", f"{phase}: rank {r}: " + rankchecks.rule("protocol", "no revealed output")
                    )
                for i, j in enumerate(which):
                    why = verify.check_commit(outs[i], res[r]["out_digests"][j], key, plan.device_type, first + j + 1)
                    if why:
                        raise Rejected("incorrect", f"{phase}: rank {r}: {why}")
                    revealed[i].append(outs[i])
            picked += [(first + j + 1, specs[j], revealed[i]) for i, j in enumerate(which)]
        if on_batch is not None:
            on_batch(b)
    if cand and picked:
        oc = ref.run(JudgeRefOutputsJob(specs=[p[1] for p in picked], size=plan.size), plan.timeout_s)
        expected = [r["outputs"] for r in _ok(oc, "verifying timed calls (reference ranks)")]
        for i, (call, _, revealed) in enumerate(picked):
            for r, data in enumerate(revealed):
                why = verify.check_timed(data, wire.decode(expected[r][i]), tol, call)
                if why:
                    raise Rejected("incorrect", f"timing (candidate): rank {r}: {why}")
        run.verified = len(picked)
    run.seconds = time.perf_counter() - t_start
    return run


def size_batches(ref: RankPool, plan: Plan, contracts: list[Any]) -> float:
    """Warm-up batches of growing size on the reference: sets plan.k so that a batch lasts about
    BATCH_S; returns the seconds of one such batch (estimated)."""
    times = {}
    for k in SIZING:
        plan.k = k
        sets = draw_sets(ref, plan, specs_for(k)[0])
        dt, key, res = run_batch(ref, JudgeBatchJob, sets, plan, "timing (warm-up)")
        _check_batch(res, sets, key, contracts, plan, 0, "timing (warm-up)")
        times[k] = dt
    per_call = max((times[SIZING[-1]] - times[SIZING[-2]]) / (SIZING[-1] - SIZING[-2]), 1e-6)
    plan.k = max(1, min(MAX_CALLS, math.ceil(BATCH_S / per_call)))
    longest = max(times[SIZING[-1]] / SIZING[-1], per_call) * (plan.k + plan.k // 2)  # Plan.batch_len's most
    plan.batch_bound_s = max(MIN_BATCH_BOUND_S, SLOWER_BOUND * longest)
    return times[SIZING[-1]] + per_call * (plan.k - SIZING[-1])


def batches_for(plan: Plan, batch_s: float) -> int:
    """Timed batches per job: enough for min_iters calls, within the budget, MIN..MAX_BATCHES."""
    n = max(MIN_BATCHES, math.ceil(plan.min_iters / max(plan.k, 1)))
    if batch_s * n > plan.budget_s:
        n = max(MIN_BATCHES, int(plan.budget_s / max(batch_s, 1e-9)))
    return min(MAX_BATCHES, n)


def stats(run: SideRun, plan: Plan, warm: int) -> dict[str, Any]:
    s = summarize(run.per_call_ms, warmup_iters=warm * plan.k, n_copies=run.calls, calls_per_iter=plan.k)
    d = s.to_dict()
    d["clock"] = "judge"
    if run.device_ms:
        d["device_median_ms"] = sorted(run.device_ms)[len(run.device_ms) // 2]
    return d
