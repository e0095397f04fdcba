"""Typed records of the test-only job kinds (mgbench.validation.jobs holds the pipeline's): the tests build
them, the handler modules tests/*_jobs.py register handlers for them in rank processes. Standard library
only, with no side effect on import (the test process imports this module, never the handler modules)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mgbench.validation.jobs import Job


@dataclass(frozen=True, kw_only=True)
class TimingProbe(Job):
    """Time an all-reduce with rank 1 slower by `extra_ms` per call."""

    kind: ClassVar[str] = "test_timing"
    extra_ms: float


@dataclass(frozen=True, kw_only=True)
class CommProbe(Job):
    """Count the bytes of real collectives and point-to-point calls."""

    kind: ClassVar[str] = "test_comm"


@dataclass(frozen=True, kw_only=True)
class MeshGroupsProbe(Job):
    """Count the process groups a 2-D plan task's first and later calls create."""

    kind: ClassVar[str] = "mesh_groups"
    path: str


@dataclass(frozen=True, kw_only=True)
class P2PPatternsProbe(Job):
    """A ring shift of `n` elements of `dtype`, three ways, through staged point-to-point."""

    kind: ClassVar[str] = "p2p_patterns"
    n: int
    dtype: str


@dataclass(frozen=True, kw_only=True)
class StagedCallsProbe(Job):
    """How many point-to-point calls this rank process staged."""

    kind: ClassVar[str] = "staged_calls"


@dataclass(frozen=True, kw_only=True)
class OracleTurnsProbe(Job):
    """This rank's oracle output as ranks sharing a GPU get it; the oracle raises where it runs on rank
    `fail_rank` (-1: none)."""

    kind: ClassVar[str] = "oracle_turns"
    fail_rank: int
    handoff_bytes_per_s: float = 1e9  # validation.checks.HANDOFF_BYTES_PER_S in the ranks (tiny: solve again)
    broken: str = ""  # "short": the oracle returns a part too few; "unpicklable": its parts hold a lambda
    handoff: str = "device"  # validation.checks.HANDOFF in the ranks
    transport: str = ""  # "file": a CPU stand-in for CUDA IPC (tests/oracle_turns_jobs.py); "file-fails-on-2":
    # the same, but rank 2 cannot open its handle; "count": the device's own transport, its opens counted


@dataclass(frozen=True, kw_only=True)
class DevicePlacementProbe(Job):
    """Run a task's reference (every rank) and oracle (rank 0) at smoke size with the tensors the task makes
    without a device tagged, and report the ops that mix them with the inputs' device."""

    kind: ClassVar[str] = "device_placement"
    path: str
    has_oracle: bool = True


@dataclass(frozen=True, kw_only=True)
class FailOnRankProbe(Job):
    """Raise on `fail_rank` (every rank when it is -1) while the other ranks all-reduce, as a task that runs
    out of memory on one rank does."""

    kind: ClassVar[str] = "fail_on_rank"
    fail_rank: int
