"""Sandboxing of candidate runs (scrapers/harness/run/sandbox.py): hostile candidates are stopped and reported;
a taken rendezvous port is retried."""

from __future__ import annotations

import os

import pytest

from mgbench.scrapers.harness.inputs.search import Budget, synthesize
from tests.harness.helpers import candidate

pytestmark = pytest.mark.sandboxed  # runs candidates or tasks through child rank processes


def test_a_taken_rendezvous_port_is_retried_not_blamed_on_the_candidate(monkeypatch):
    """Two runs in flight can pick the same free port; the loser's rank 0 fails to listen (EADDRINUSE). The
    run is repeated on a new port instead of rejecting the candidate as a timeout."""
    import socket

    from mgbench.scrapers.harness.make.render import prepare, task_source
    from mgbench.scrapers.harness.run import sandbox
    from mgbench.validation.pool import free_port
    from tests.harness.helpers import candidate

    cand, text = candidate("grad_allreduce")
    spec = {
        "entry": cand["entry"],
        "kind": "function",
        "attrs": [],
        "n_attr": 8,
        "args": [
            {"name": "grad", "kind": "tensor", "shape": ["n"], "dtype": "float32", "replicated": False},
            {"name": "group", "kind": "group", "value": "world"},
        ],
    }
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        ports = iter([busy.getsockname()[1], free_port()])
        monkeypatch.setattr(sandbox, "free_port", lambda: next(ports))
        at = sandbox.run_ranks(task_source(cand, prepare(text), spec), 2, 8, timeout_s=6)
    assert at.status == "ok", (at.status, at.reason, at.replies)


@pytest.mark.parametrize(
    "name,reason",
    [
        ("loops", "timeout"),
        ("allocates", "memory_limit"),
        ("writes", "sandbox_violation: write outside"),
        ("spawns", "sandbox_violation: forbidden operation"),
    ],
)
def test_hostile_candidates_are_stopped_and_reported(name, reason):
    cand, text = candidate(name)
    res = synthesize(cand, text, Budget(seconds=20, attempts=3, attempt_timeout_s=3, mem_mb=256))
    assert not res.accepted
    assert res.reason.startswith(reason), res.reason
    assert not os.path.exists("/tmp/mgbench_harness_escape.txt")


def test_a_candidate_sees_no_tools_or_gpus_of_the_machine_that_searches_it():
    """A platform check at import (`shutil.which("nvidia-smi")`) must not pass on a GPU machine's search and
    fail on a CPU machine's validation: candidates run with an empty PATH and no visible CUDA devices."""
    cand, text = candidate("probes_machine")
    res = synthesize(cand, text, Budget(seconds=30, attempts=3, attempt_timeout_s=10, mem_mb=512))
    assert res.accepted, res.reason
