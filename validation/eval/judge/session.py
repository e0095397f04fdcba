"""The phases of one evaluation in the judge: setup, correctness trials, timing (docs/eval.md).

`Judge` drives two rank pools: the candidate's (fresh, judge.candidate handlers) and the reference's
(clean, judge.reference handlers). The inputs of every call come from the reference ranks under
seeds the candidate never sees; expected outputs, tolerances, comparisons, the choice of verified
timed calls and the clock stay in this process.
"""

from __future__ import annotations

import os
from typing import Any

from mgbench import backends
from mgbench.validation.compare import Tolerance
from mgbench.validation.eval import outcome, rankchecks, shapes
from mgbench.validation.eval.judge import clock, isolate, verify, wire
from mgbench.validation.jobs import JudgeCandCallJob, JudgeCandSetupJob, JudgeRefSetupJob, JudgeRefTrialJob
from mgbench.validation.pool import RankPool

# The first timing of a pool runs slow on GPUs, so a discarded warm-up (which also sizes the
# batches) goes first and the rest is ABBA, which also cancels a linear drift.
TIMING_ORDER = ("warm-up", "reference", "candidate", "candidate", "reference")
# A correctness trial's inputs on the candidate's ranks: fresh tensors; fresh, kept by the ranks for a later
# trial; or that later trial's values written into the kept tensors in place (runner._run_phases)
INPUT_MODES = ("fresh", "keep", "rewrite")


class Judge:
    def __init__(
        self,
        cand: RankPool,
        ref: RankPool,
        task: Any,
        opts: Any,
        rec: dict[str, Any],
        containment: isolate.Containment | None = None,
    ):
        self.cand, self.ref, self.task, self.opts, self.rec = cand, ref, task, opts, rec
        self.containment = containment  # the candidate's processes that left its ranks' tree
        self.tol: Tolerance | None = None
        self.contracts: list[Any] = []  # per rank: the reference's output structure, dtypes and shapes
        self.prev: list[Any] = [None] * opts.world_size
        self.sched: dict[int, tuple] = {}
        self.kept_expected: list[Any] = []  # per rank: the expected outputs of the trial whose inputs were kept
        self.meddled = ""  # a change interference() saw, kept: the processes it was seen on may be gone since
        # a reference pool torn down after a failed job (one rank failing alone) takes the changed limits of
        # its processes with it: they are read just before (runner.JudgePool.restart)
        ref.before_teardown = self.interference

    def _watched(self) -> list[int]:
        return [p.pid for p in self.ref.procs] + [os.getpid()]

    def setup(self, source: str, filename: str) -> tuple[str, str]:
        ref_job = JudgeRefSetupJob(
            task_source=self.task.source, has_oracle=self.task.has_oracle, task_id=self.task.task_id
        )
        status, why = outcome.classify(self.ref.run(ref_job, self.opts.timeout_s), "setup (reference ranks)")
        if status != "ok":
            return "error", why
        self.sched = isolate.sched_state(self._watched())
        job = JudgeCandSetupJob(cand_source=source, filename=filename)
        return outcome.classify(self.cand.run(job, self.opts.timeout_s), "setup")

    def trial(
        self,
        seed: int,
        phase: str,
        shape: dict[str, Any] | None = None,
        inputs: str = "fresh",
    ) -> tuple[str, str]:
        """One correctness trial: the reference ranks draw the inputs and compute the expected
        outputs; the candidate's ranks get the inputs as bytes; the judge compares. With `shape`, at
        that held-out shape: the published shape's output contracts and tolerance (what timing uses)
        stay as they were, and a reference that cannot run the shape gives "skip". `inputs` (INPUT_MODES):
        "keep", the candidate's ranks keep this call's input tensors; "rewrite", they write this trial's
        inputs into the kept ones in place and call on those (the kept trial's answer: rule
        rewritten_inputs)."""
        assert inputs in INPUT_MODES, inputs
        o, has_oracle = self.opts, self.task.has_oracle
        size = shapes.HELDOUT_SIZE if shape is not None else o.size
        job = JudgeRefTrialJob(seed=seed, size=size, has_oracle=has_oracle, shape=shape)
        oc = self.ref.run(job, o.timeout_s)
        status, why = outcome.classify(oc, f"{phase} (reference ranks)")
        if status != "ok":
            return ("skip" if shape is not None else "error"), why
        res = outcome.rank_results(oc)
        refs = [wire.decode(r["reference"]) for r in res]
        exps = [wire.decode(r["expected"]) for r in res]
        in_dtypes = [d for r in res for d in verify.dtypes_of_meta(wire.meta_of_data(r["inputs"]))]
        tol = verify.tolerance(self.task.tolerance, refs, exps, has_oracle, in_dtypes)
        if shape is None:
            self.tol, self.contracts = tol, [verify.declared(x) for x in refs]
        rewrite = inputs == "rewrite"
        jobs = [JudgeCandCallJob(inputs=r["inputs"], keep_inputs=inputs == "keep", rewrite_inputs=rewrite) for r in res]
        oc = self.cand.run(jobs, o.timeout_s)
        status, why = outcome.classify(oc, phase)
        if status != "ok":
            return status, why
        errs = []
        for r, rep in enumerate(outcome.rank_results(oc)):
            flags = [f for f in rep.get("flags") or [] if type(f) is str]
            self.rec["flags"] += flags
            if rewrite and not rep.get("rewritten") and not rep.get("reason"):  # the rank's word: not a proof
                self.rec["flags"].append(
                    f"review: {phase}: rank {r} says it was called on fresh input tensors, not on the kept ones"
                )
            why, out, err = verify.check_call(
                rep,
                res[r]["inputs"],
                refs[r],
                exps[r],
                tol,
                not has_oracle,
                self.prev[r],
                self.kept_expected[r] if rewrite and self.kept_expected else None,
            )
            if why:
                threads = [f for f in flags if "thread(s) running" in f]
                return "incorrect", f"{phase}: rank {r}: {why}" + (f" [{threads[0]}]" if threads else "")
            self.prev[r] = out
            errs.append(err or 0.0)
        if shape is None:
            self.rec["tolerance"] = {"rtol": tol.rtol, "atol_rel": tol.atol_rel}
        if inputs == "keep":
            self.kept_expected = exps
        elif inputs == "rewrite":
            self.kept_expected = []  # used once
        self.rec["max_error"] = max(errs + [self.rec["max_error"] or 0.0])
        return "ok", ""

    def interference(self) -> str:
        """The rejection reason if the scheduling or resource limits of the judge's or the reference's
        processes changed since the reference ranks started, else ""."""
        if self.meddled or not self.sched:
            return self.meddled
        moved = isolate.changed(self.sched, isolate.sched_state(self._watched()))
        if not moved:
            return ""
        self.meddled = rankchecks.rule(
            "interference",
            f"the scheduling or limits (policy, nice, CPUs, cgroup, rlimits) of the judge's or the reference's "
            f"processes changed while the candidate ran ({moved[0]}{' +more' if len(moved) > 1 else ''})",
        )
        return self.meddled

    def timing(self) -> tuple[str, str, dict[str, Any]]:
        """ABBA timing of both sides on the judge's clock; (status, reason, stats by side)."""
        o = self.opts
        plan = clock.Plan(
            o.size, o.timeout_s, o.budget_s, o.min_iters, "cuda" if backends.backend(o.backend).on_gpu else "cpu"
        )
        runs: dict[str, list[dict[str, Any]]] = {"reference": [], "candidate": []}
        checked = {"calls": 0, "verified": 0, "fresh_input_sets": 0}
        cand_pids = [p.pid for p in self.cand.procs]
        n, stopped = clock.MIN_BATCHES, 0
        try:
            for which in TIMING_ORDER:
                if which == "candidate":
                    run = clock.time_side(
                        "candidate", self.cand, self.ref, plan, self.contracts, verify.widened(self.tol), n
                    )
                    runs["candidate"].append(clock.stats(run, plan, 1))
                    checked = {
                        "calls": checked["calls"] + run.calls,
                        "verified": checked["verified"] + run.verified,
                        "fresh_input_sets": checked["fresh_input_sets"] + run.calls,
                    }
                    continue
                why = self.interference()
                if why:
                    return "incorrect", f"timing: {why}", {}
                strays = self.containment.strays() if self.containment else []
                # nothing of the candidate runs while the reference is timed
                with isolate.paused(cand_pids + strays) as paused:
                    stopped = max(stopped, len(paused))
                    if which == "warm-up":
                        n = clock.batches_for(plan, clock.size_batches(self.ref, plan, self.contracts))
                    else:
                        run = clock.time_side("reference", self.ref, self.ref, plan, self.contracts, None, n)
                        runs["reference"].append(clock.stats(run, plan, 1))
                    why = self.interference()  # again before anything of the candidate's runs on
                    if why:
                        return "incorrect", f"timing: {why}", {}
        except clock.Rejected as e:
            return e.status, e.reason, {}
        stats: dict[str, Any] = {w: outcome.combine_runs(runs[w]) for w in runs}
        stats["candidate_timed_checks"] = checked
        stats["candidate_processes_stopped"] = stopped  # while the reference was timed
        return "ok", "", stats
