"""Evaluate one candidate solution of one task (the judge's side: this process never imports it).

Phases: static checks (libcst, in this process: parsing only, never importing) -> setup (the task in
clean reference ranks, the candidate in fresh rank processes of its own) -> `trials` correctness
trials with fresh seeds -> held-out shapes -> timing of the reference and of the candidate on the judge's
clock -> one more correctness trial after timing -> a last one on the input tensors of the trial before it,
new values written into them in place. The first failure ends the evaluation. What runs where:
mgbench.validation.eval.judge (docs/eval.md, "Trust boundary").
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import platform
import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mgbench import backends
from mgbench.validation.eval import outcome, rankchecks, shapes
from mgbench.validation.eval.judge import isolate, sandbox, wire
from mgbench.validation.eval.judge.session import Judge
from mgbench.validation.eval.static import check_source
from mgbench.validation.eval.tasks import TaskInfo, baselines_for
from mgbench.validation.pool import RankPool
from mgbench.validation.timing import TIMING_VERSION

HANDLERS = "mgbench.validation.eval.judge.candidate"
REF_HANDLERS = "mgbench.validation.eval.judge.reference"
# Bumped when the checks change what passes (2: plain outputs, candidate before reference, timed-call
# verification over perturbed inputs, audit guard; 3: the judge in its own process, the reference in
# clean ranks, fresh secret inputs for every call, the judge's clock; 4: the candidate's ranks in a sandbox
# where the kernel allows one, the record's `sandbox` field; 5: timed calls streamed, each call's inputs sent
# only after the call before it returned and its output fingerprinted at its return; 6: a last trial on the
# kept input tensors rewritten in place, rule rewritten_inputs); records of older
# versions were judged by weaker checks.
INTEGRITY_VERSION = 6
REWRITE_PHASE = "trial on the inputs rewritten in place"
MIN_VERIFIED_TIMED_CALLS = 2
PRELOAD = ["torch", "torch.distributed", "mgbench.validation.worker", HANDLERS, REF_HANDLERS]


@dataclass
class EvalOptions:
    world_size: int = 2
    backend: str = "gloo"
    size: str = "smoke"
    trials: int = 5
    timeout_s: float = 60.0
    budget_s: float = 1.0
    min_iters: int = 50  # timed iterations at least (the budget also pays for input copies)
    seed: int | None = None
    static: bool = True
    require_static: bool = False
    timing: bool = True
    max_speedup: float = 10.0
    hardware: str | None = None
    heldout_shapes: int = 1  # shapes drawn from the task's shape space per evaluation (0: none)
    pinned_shapes: dict[str, list[dict[str, Any]]] | None = None  # task id -> shapes to use instead of drawing
    sandbox: str = "auto"  # the candidate's ranks in namespaces of their own: auto | require | off


class JudgePool(RankPool):
    """A single-use rank pool of the judge, started from the fork server: after a timeout or crash it is
    torn down, never restarted."""

    handlers = ""
    before_teardown: Callable[[], Any] | None = None  # called before the pool is torn down after a failed job

    def __init__(self, world_size: int, backend: str, pg_timeout_s: float):
        method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        if method == "forkserver":
            mp.get_context("forkserver").set_forkserver_preload(PRELOAD)
        super().__init__(
            world_size, backend, pg_timeout_s=pg_timeout_s, extra_handlers=[self.handlers], start_method=method
        )

    def restart(self) -> None:
        if self.before_teardown is not None and self.procs:
            self.before_teardown()
        self.kill()


class ReferencePool(JudgePool):
    """The clean reference ranks of one evaluation: they never load candidate code."""

    handlers = REF_HANDLERS


class CandidatePool(JudgePool):
    """The candidate's ranks, fresh for every candidate, in a sandbox of their own (judge/sandbox.py)
    where the kernel allows one. Their replies are decoded as plain data only (wire.safe_loads)."""

    handlers = HANDLERS
    reply_loads = staticmethod(wire.safe_loads)

    def __init__(self, world_size: int, backend: str, pg_timeout_s: float, sandbox_mode: str = "auto"):
        super().__init__(world_size, backend, pg_timeout_s)
        self.sandbox_mode = sandbox_mode
        self.walls = sandbox.Walls(error="not started")

    def start(self) -> None:
        self.sandbox_pids: set[int] = set()
        self.helpers_killed = 0
        self.walls = sandbox.start_pool(self, self.sandbox_mode)

    def run(self, job: Any, timeout_s: float, grace_s: float = 3.0, feeds: list[list[bytes]] | None = None) -> Any:
        """A job on the candidate's ranks; then, in the sandbox, whatever process the candidate left there
        is killed before the judge goes on (nothing of the candidate's runs between its jobs)."""
        out = super().run(job, timeout_s, grace_s, feeds)
        if self.sandbox_pids and self.procs:
            self.helpers_killed += sandbox.reap(self.procs[0].pid, self.sandbox_pids)
        return out


def sample_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def hardware_name(backend: str, world_size: int) -> str:
    """What a record says it was judged on; ranks sharing GPUs say so (their times are not results)."""
    if backends.backend(backend).on_gpu:
        import torch

        gpus = torch.cuda.device_count()
        if backend == "nccl":
            return f"{world_size}x {torch.cuda.get_device_name(0)}"
        return f"{world_size} ranks on {min(gpus, world_size)}x {torch.cuda.get_device_name(0)} (shared)"
    return f"{platform.machine()} cpu"


def _record(task: TaskInfo, path: Path, source: str, opts: EvalOptions) -> dict[str, Any]:
    return {
        "task_id": task.task_id,
        "content_hash": task.content_hash,
        "sample": path.name,
        "sample_path": str(path),
        "sample_hash": sample_hash(source),
        **task.tags(),
        "world_size": opts.world_size,
        "backend": opts.backend,
        "size": opts.size,
        "hardware": hardware_name(opts.backend, opts.world_size),
        "sandbox": None,  # what walled the candidate's ranks in (judge/sandbox.py), or why nothing did
        "trials": opts.trials,
        "trials_passed": 0,
        "status": "error",
        "correct": False,
        "reason": "",
        "phase": "",
        "seed": None,
        "static": None,
        "tolerance": None,
        "max_error": None,
        "timing": None,
        "speedup": None,
        "speedups": {},
        "noise_floor": None,
        "noise_source": "",
        "within_noise": None,
        "roofline_fraction": None,
        "roofline_ms": None,
        "timing_on": opts.timing,
        "flags": [],
        "review": False,
        "suspicious": [],
        "integrity_version": INTEGRITY_VERSION,
        "seconds": 0.0,
    }


def _finish(rec: dict[str, Any], status: str, reason: str, phase: str, t0: float) -> dict[str, Any]:
    rec.update(
        status=status,
        correct=status == "correct",
        reason=reason,
        phase=phase,
        seconds=round(time.monotonic() - t0, 3),
        finished_at=round(time.time(), 3),
    )
    rec["flags"] = sorted(set(rec["flags"]))
    rec["review"] = any(f.startswith("review") for f in rec["flags"])
    rec["suspicious"] = suspicious(rec) if status == "correct" else []
    return rec


def suspicious(rec: dict[str, Any]) -> list[str]:
    """Reasons to doubt a correct record's speed that its flags do not already carry (for `mgbench
    score`, which adds the speed flags past the sanity and roofline bounds itself; not a verdict
    here): threads left running, and timed calls too few verified to vouch for the timed outputs.
    Static review findings are not about speed: `score --exclude-flagged` is their switch."""
    out = [f for f in rec["flags"] if "thread(s) running" in f]
    checks = (rec.get("timing") or {}).get("candidate_timed_checks")
    if checks is not None and checks.get("verified", 0) < MIN_VERIFIED_TIMED_CALLS:
        out.append(
            f"only {checks.get('verified', 0)} timed call(s) verified against the reference "
            f"(fewer than {MIN_VERIFIED_TIMED_CALLS})"
        )
    return out


def _static(rec: dict[str, Any], source: str, task: TaskInfo, opts: EvalOptions) -> str:
    """Run the static checks; returns the rejection reason or ""."""
    if not opts.static:
        rec["static"] = {"available": False, "message": "static checks disabled (--no-static)", "findings": []}
        return ""
    rep = check_source(source, forbid_collectives=task.forbid_collectives)
    rec["static"] = rep.to_dict()
    if not rep.available and opts.require_static:
        return f"static: {rep.message}"
    rec["flags"] += [f"review: static: {f.describe()}" for f in rep.reviews()]
    rejects = rep.rejects()
    return (
        f"static: {rejects[0].describe()}" + (f" (+{len(rejects) - 1} more)" if len(rejects) > 1 else "")
        if rejects
        else ""
    )


def evaluate(task: TaskInfo, path: Path | str, opts: EvalOptions) -> dict[str, Any]:
    """Evaluate the solution file at `path`; returns the result record (see docs in eval/commands.py)."""
    t0 = time.monotonic()
    path = Path(path)
    source = path.read_text()
    rec = _record(task, path, source, opts)
    rec["roofline_ms"] = _bound(task, opts) if opts.timing else None
    why = _static(rec, source, task, opts)
    if why:
        return _finish(rec, "incorrect", why, "static", t0)
    base = opts.seed if opts.seed is not None else secrets.randbelow(2**31)
    rec["seed"] = base
    containment = isolate.Containment()
    try:
        pg_timeout = max(opts.timeout_s * 2, 60)
        with ReferencePool(opts.world_size, opts.backend, pg_timeout) as ref:
            containment.allow([p.pid for p in ref.procs])
            with CandidatePool(opts.world_size, opts.backend, pg_timeout, opts.sandbox) as pool:
                rec["sandbox"] = pool.walls.describe()
                # the sandbox's own processes: orphaned when the judge kills the leader, not strays
                containment.allow([p.pid for p in pool.procs] + sorted(pool.sandbox_pids))
                judge = Judge(pool, ref, task, opts, rec, containment)
                status, why, phase = _run_phases(judge, source, path, opts, base, rec)
                if pool.helpers_killed:
                    rec["flags"].append(
                        f"review: {pool.helpers_killed} process(es) the candidate left running in its sandbox "
                        "between calls (killed)"
                    )
    except RuntimeError as e:  # the pool could not start (rank died while starting...)
        status, why, phase = "error", f"setup: {e}", "setup"
    finally:
        # the ranks are gone: nothing they started outlives the evaluation (to rewrite its result, say)
        left = containment.end()
    if left:
        rec["flags"].append(f"review: {left} process(es) the candidate started outlived its ranks (killed)")
    return _finish(rec, status, why, phase, t0)


def _run_phases(
    judge: Judge, source: str, path: Path, opts: EvalOptions, base: int, rec: dict[str, Any]
) -> tuple[str, str, str]:
    status, why = judge.setup(source, str(path.name))
    if status != "ok":
        return status, why, "setup"
    for k in range(opts.trials):
        # without timing, the last trial's input tensors are the ones rewritten in place at the end
        keep = not opts.timing and k == opts.trials - 1
        status, why = judge.trial(
            base + 7919 * (k + 1), f"trial {k + 1}/{opts.trials}", inputs="keep" if keep else "fresh"
        )
        if status != "ok":
            return status, why, f"trial {k + 1}"
        rec["trials_passed"] = k + 1
    status, why, phase = _heldout(judge, opts, base, rec)
    if status != "ok":
        return status, why, phase
    if opts.timing:
        status, why = _timing(judge, opts, rec)
        if status != "ok":
            return status, why, "timing"
        status, why = judge.trial(base + 7919 * (opts.trials + 1), "trial after timing", inputs="keep")
        if status != "ok":
            return status, why, "trial after timing"
    # Last, so no call count of the phases before moves: the kept inputs again, with new values written in
    # place. A cache keyed on the input objects (id, address, version) hits here on every rank, whatever the
    # allocator reused before (benchmarks/heldout_cheats/*@id_ptr_cache.py was judged correct when it did not).
    status, why = judge.trial(base + 7919 * (opts.trials + 2), REWRITE_PHASE, inputs="rewrite")
    if status != "ok":
        return status, why, REWRITE_PHASE
    return "correct", "", "done"


def heldout_shapes_for(task: TaskInfo, opts: EvalOptions, base: int) -> list[dict[str, Any]]:
    """The held-out shapes of one evaluation: the maintainer's pinned set for the task, else
    opts.heldout_shapes drawn from the shape space of the evaluated size class (validation/eval/shapes.py)
    with the evaluation's base seed; none for a task without published size classes (level 4)."""
    if opts.pinned_shapes is not None and task.task_id in opts.pinned_shapes:
        return [dict(s) for s in opts.pinned_shapes[task.task_id]]
    sizes = task.published_sizes()
    if task.level == 4 or opts.size not in sizes or not opts.heldout_shapes:
        return []
    space = shapes.space_of(sizes, opts.size, task.shape_rule)
    rng = random.Random(f"{base}:{task.task_id}:heldout")
    drawn = [shapes.draw(space, rng) for _ in range(opts.heldout_shapes)]
    return [d for d in drawn if d is not None]


def _heldout(judge: Judge, opts: EvalOptions, base: int, rec: dict[str, Any]) -> tuple[str, str, str]:
    """Correctness at each held-out shape; a failure of the candidate there (wrong, or it cannot run the
    shape) is incorrect under rule heldout_shape; a shape the reference itself cannot run is skipped
    with a note (a gap of the shape space, not the candidate's). Either way, if the candidate's processes
    changed the reference's limits or scheduling, that is the reason (rule interference)."""
    published = judge.task.published_sizes().get(opts.size, {})
    rec["heldout_shapes"] = []
    for k, shape in enumerate(heldout_shapes_for(judge.task, opts, base)):
        what = shapes.describe(shape, published)
        status, why = judge.trial(base + 104729 * (k + 1), f"held-out shape {k + 1}", shape=shape)
        if status != "ok":
            # Checked on a skip and on a wrong answer alike: a lowered address-space limit fails the reference
            # only if it still has to map memory, so whether the shape was skipped depended on the allocator
            # (the same cheat was judged one way or the other from run to run).
            meddled = judge.interference()
            if meddled:
                return "incorrect", f"held-out shape {k + 1}: {meddled}", f"held-out shape {k + 1}"
        if status == "skip":  # the reference failed there: its own gap
            rec["flags"].append(f"note: held-out shape {what} skipped: the reference cannot run it ({why[:160]})")
            continue
        rec["heldout_shapes"].append(shape)
        if status != "ok":
            reason = f"held-out shape {k + 1}, never printed ({what}): {status}: {why}"
            return "incorrect", rankchecks.rule("heldout_shape", reason), f"held-out shape {k + 1}"
    return "ok", "", ""


def _recorded_baselines(task: TaskInfo, opts: EvalOptions) -> tuple[list[dict[str, Any]], int]:
    """(recorded baselines of the current timing method for this world size and hardware, how many
    older ones were dropped); none off NCCL at full size (baselines are GPU, full-size numbers)."""
    if not (opts.backend == "nccl" and opts.size == "full"):
        return [], 0
    return outcome.current_timing(baselines_for(task, opts.world_size, opts.hardware), TIMING_VERSION)


def _bound(task: TaskInfo, opts: EvalOptions) -> float | None:
    """The task's roofline bound (ms) on the recorded hardware, known before the candidate runs, so an
    incorrect record carries it too (its SOL score is then 0, not undefined)."""
    return outcome.roofline_ms(_recorded_baselines(task, opts)[0])


def _timing(judge: Judge, opts: EvalOptions, rec: dict[str, Any]) -> tuple[str, str]:
    task = judge.task
    status, why, stats = judge.timing()
    if status != "ok":
        return status, why
    rec["timing"] = stats
    ref, cand = stats["reference"], stats["candidate"]
    bases, stale = _recorded_baselines(task, opts)
    if stale:
        rec["flags"].append(f"note: {stale} recorded baseline(s) of an older timing method ignored")
    rec["speedups"] = outcome.speedups(ref, cand, bases)
    rec["speedup"] = rec["speedups"].get("reference")
    rec["noise_floor"], rec["noise_source"] = outcome.noise_floor(bases, ref, cand)
    if rec["speedup"] is not None:
        rec["within_noise"] = 1 / rec["noise_floor"] <= rec["speedup"] <= rec["noise_floor"]
    bound = rec["roofline_ms"]
    if bound:
        rec["roofline_fraction"] = bound / cand["median_ms"]
    rec["flags"] += outcome.review_flags(rec["speedup"], cand["median_ms"], bound, opts.max_speedup)
    return "ok", ""
