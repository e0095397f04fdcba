"""The jobs a RankPool sends to its rank processes: one small typed record per job kind.

`kind`, a class attribute, names the record's handler in mgbench.validation.worker.HANDLERS: the worker
handles "check" and "ping"; the modules named in RankPool(extra_handlers=[...]) register the other kinds
on import (worker.register(RecordType, handler)). Senders build a record and pass it to RankPool.run;
every handler takes that record.

On the pipe a record travels as plain data, `Job.wire()` = (kind, {field: value}), and the worker
rebuilds it from its table: the candidate ranks of `mgbench eval` refuse to import harness modules once
candidate code is loaded (mgbench.validation.eval.guard), so reading a job must never import a class
of mgbench. Field values are plain Python data (str, int, float, bool, None, bytes, and lists and dicts of them).

kind               record          sent by                                       handled in
check              CheckJob        mgbench.validation.run.check_task             mgbench.validation.worker
ping               PingJob         tests (a pool's smoke test)                   mgbench.validation.worker
echo_stream        EchoStreamJob   tests, benchmarks/judge_call_cost.py          mgbench.validation.worker
ceilings           CeilingsJob     mgbench.validation.gpu.run                    mgbench.validation.gpu.handlers
time               TimeJob         mgbench.validation.gpu.run                    mgbench.validation.gpu.handlers
baseline           BaselineJob     mgbench.validation.gpu.run                    mgbench.validation.gpu.handlers
mined_fingerprint  FingerprintJob  mgbench.scrapers.harness.run.crosscheck       (the same module)
level4_trace       TraceJob        mgbench.scrapers.level4.trace                 (the same module)
judge_ref_*        JudgeRef*Job    mgbench.validation.eval.judge.session, .clock  ...judge.reference
judge_cand_*       JudgeCand*Job   mgbench.validation.eval.judge.session, .clock  ...judge.candidate

Standard library only: senders build records without the rank side's imports.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

# A streamed job: its handler sends steps ({STEP: n, ...}, no "ok") with RankContext.exchange, and the pool
# answers each with the rank's next message, or STEP_END once there is none (RankPool.run(feeds=...)).
STEP = "step"
STEP_END = "end"


def is_step_end(msg: Any) -> bool:
    """Whether the pool's answer to a step ends the streamed job (no next message)."""
    return type(msg) is str and msg == STEP_END


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
    shape: dict[str, Any] | None = None  # a held-out shape: registered as the module's SIZES[size] first


@dataclass(frozen=True, kw_only=True)
class PingJob(Job):
    """An all-reduce of the ranks' numbers: the pool's process group works."""

    kind: ClassVar[str] = "ping"


@dataclass(frozen=True, kw_only=True)
class EchoStreamJob(Job):
    """A streamed job that only answers: each step sends the size of the message before it; the reply
    counts the steps (the pool's streaming and its cost per step)."""

    kind: ClassVar[str] = "echo_stream"
    first: Any = None


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


# --- the out-of-process judge of `mgbench eval` (mgbench.validation.eval.judge) -----------------------------
# Reference ranks (judge/reference.py) never load candidate code; candidate ranks (judge/candidate.py) hold
# nothing the judge relies on. Inputs and outputs travel as judge/wire.py bytes.
@dataclass(frozen=True, kw_only=True)
class JudgeRefSetupJob(Job):
    """Load the task module from its source in a reference rank."""

    kind: ClassVar[str] = "judge_ref_setup"
    task_source: str
    has_oracle: bool
    task_id: str = ""  # names the task's entry in validation/oracle_parts.py, if any


@dataclass(frozen=True, kw_only=True)
class JudgeRefTrialJob(Job):
    """A correctness trial's inputs, expected outputs and reference error, drawn under a secret seed."""

    kind: ClassVar[str] = "judge_ref_trial"
    seed: int
    size: str
    has_oracle: bool
    shape: dict[str, Any] | None = None  # a held-out shape, registered as the task's SIZES[size] first


@dataclass(frozen=True, kw_only=True)
class JudgeRefInputsJob(Job):
    """Input sets for timed calls, one per spec (secret seeds, some sets re-drawn as decoys)."""

    kind: ClassVar[str] = "judge_ref_inputs"
    specs: list
    size: str


@dataclass(frozen=True, kw_only=True)
class JudgeRefOutputsJob(JudgeRefInputsJob):
    """The reference's outputs on the input sets of `specs` (the expected outputs of verified calls)."""

    kind: ClassVar[str] = "judge_ref_outputs"


@dataclass(frozen=True, kw_only=True)
class JudgeBatchJob(Job):
    """One timed batch on the reference ranks, streamed: `first` is the first call's input set, each later
    one comes after the call before it (RankPool.run(feeds=...)); outputs fingerprinted with `key`."""

    kind: ClassVar[str] = "judge_ref_batch"
    first: Any
    key: int


@dataclass(frozen=True, kw_only=True)
class JudgeCandBatchJob(JudgeBatchJob):
    """One timed batch on the candidate's ranks; its outputs are kept until the judge picks some."""

    kind: ClassVar[str] = "judge_cand_batch"


@dataclass(frozen=True, kw_only=True)
class JudgeCandSetupJob(Job):
    """Load the candidate's solution file in a candidate rank (fresh processes for every candidate)."""

    kind: ClassVar[str] = "judge_cand_setup"
    cand_source: str
    filename: str


@dataclass(frozen=True, kw_only=True)
class JudgeCandCallJob(Job):
    """One correctness trial: call the candidate on the judge's inputs, send the outputs back."""

    kind: ClassVar[str] = "judge_cand_call"
    inputs: Any
    keep_inputs: bool = False  # keep this call's input tensors for a later call's rewrite_inputs
    # write the sent values into the kept input tensors (same objects, addresses and versions) and call on them
    rewrite_inputs: bool = False


@dataclass(frozen=True, kw_only=True)
class JudgeCandRevealJob(Job):
    """The full outputs of the timed calls the judge picked after the batch."""

    kind: ClassVar[str] = "judge_cand_reveal"
    which: list
