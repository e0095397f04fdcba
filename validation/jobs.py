"""The jobs a RankPool sends to its rank processes: one small typed record per job kind.

`kind`, a class attribute, names the record's handler in mgbench.validation.worker.HANDLERS: the worker
handles "check" and "ping"; the modules named in RankPool(extra_handlers=[...]) register the other kinds
on import (worker.register(RecordType, handler)). Senders build a record and pass it to RankPool.run;
every handler takes that record.

On the pipe a record travels as plain data, `Job.wire()` = (kind, {field: value}), and the worker
rebuilds it from its table: the rank processes of `mgbench eval` refuse to import harness modules once
candidate code is loaded (mgbench.validation.eval.guard), so reading a job must never import a class
of mgbench. Field values are plain Python data (str, int, float, bool, None, dicts of them).

kind               record          sent by                                       handled in
check              CheckJob        mgbench.validation.run.check_task             mgbench.validation.worker
ping               PingJob         tests (a pool's smoke test)                   mgbench.validation.worker
ceilings           CeilingsJob     mgbench.validation.gpu.run                    mgbench.validation.gpu.handlers
time               TimeJob         mgbench.validation.gpu.run                    mgbench.validation.gpu.handlers
baseline           BaselineJob     mgbench.validation.gpu.run                    mgbench.validation.gpu.handlers
eval_setup         EvalSetupJob    mgbench.validation.eval.runner                mgbench.validation.eval.handlers
eval_trial         EvalTrialJob    mgbench.validation.eval.runner                mgbench.validation.eval.handlers
eval_time          EvalTimeJob     mgbench.validation.eval.runner                mgbench.validation.eval.handlers
mined_fingerprint  FingerprintJob  mgbench.scrapers.harness.run.crosscheck       (the same module)
level4_trace       TraceJob        mgbench.scrapers.level4.trace                 (the same module)

Standard library only: senders build records without the rank side's imports.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar


@dataclass(frozen=True, kw_only=True)
class Job:
    """A job for every rank of a pool; subclasses set `kind` and add their fields."""

    kind: ClassVar[str] = ""

    def wire(self) -> tuple[str, dict[str, Any]]:
        """What crosses the pipe: the kind and the field values."""
        return self.kind, {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, kw_only=True)
class TaskJob(Job):
    """A job on one task module file, loaded once per (path, content_hash) in each rank."""

    path: str
    content_hash: str = ""
    seed: int = 0


# --- the worker's own kinds -----------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class CheckJob(TaskJob):
    """The correctness checks of one task (mgbench.validation.checks.run_checks)."""

    kind: ClassVar[str] = "check"
    size: str
    has_oracle: bool = True


@dataclass(frozen=True, kw_only=True)
class PingJob(Job):
    """An all-reduce of the ranks' numbers: the pool's process group works."""

    kind: ClassVar[str] = "ping"


# --- the GPU pass (mgbench.validation.gpu) ----------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class CeilingsJob(Job):
    """Measure this rank's hardware ceilings."""

    kind: ClassVar[str] = "ceilings"


@dataclass(frozen=True, kw_only=True)
class TimeJob(TaskJob):
    """Roofline trace, peak memory, eager timing and (with `null`) the null candidate of one task."""

    kind: ClassVar[str] = "time"
    size: str = "full"
    budget_s: float = 1.0
    null: bool = True


@dataclass(frozen=True, kw_only=True)
class BaselineJob(TaskJob):
    """Build, check against the reference and time one baseline of a task."""

    kind: ClassVar[str] = "baseline"
    baseline: str
    size: str = "full"
    budget_s: float = 1.0
    task: dict[str, Any] = field(default_factory=dict)  # the manifest's family and params
    tolerance: dict[str, float] | None = None


# --- `mgbench eval` (mgbench.validation.eval) -------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class EvalSetupJob(Job):
    """Load the task from its source text and the candidate file, behind the harness guard."""

    kind: ClassVar[str] = "eval_setup"
    task_source: str
    cand_source: str
    filename: str
    has_oracle: bool


@dataclass(frozen=True, kw_only=True)
class EvalTrialJob(Job):
    """One correctness trial of the candidate with a fresh seed."""

    kind: ClassVar[str] = "eval_trial"
    seed: int
    size: str
    has_oracle: bool
    tolerance: dict[str, float] | None = None


@dataclass(frozen=True, kw_only=True)
class EvalTimeJob(Job):
    """Time the reference or the candidate; timed calls verified with `verify_seed` (default: `seed`)."""

    kind: ClassVar[str] = "eval_time"
    which: str  # "reference" | "candidate"
    seed: int
    size: str
    budget_s: float
    min_iters: int = 10
    verify_seed: int | None = None
    verify_rate: float | None = None  # None: mgbench.validation.eval.timed.VERIFY_RATE
    sync_iters: int = 20


# --- level-4 tasks (mgbench.scrapers) -----------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class FingerprintJob(TaskJob):
    """A fingerprint of a level-4 task's smoke outputs (the gloo/NCCL cross-check)."""

    kind: ClassVar[str] = "mined_fingerprint"


@dataclass(frozen=True, kw_only=True)
class TraceJob(TaskJob):
    """The traced call of a level-4 task's solution at `size` (the gate's trace)."""

    kind: ClassVar[str] = "level4_trace"
    size: str = "full"
