"""The candidate's sandbox (validation/eval/judge/sandbox.py): from inside it, the candidate reaches no
process, port, socket or file of the judge's, and nothing it starts outlives its ranks."""

from __future__ import annotations

import multiprocessing.forkserver
import os
import shutil
import socket
import tempfile
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from mgbench.validation.eval.judge import isolate, sandbox
from mgbench.validation.eval.runner import EvalOptions, evaluate
from mgbench.validation.eval.tasks import load_tasks_folder
from tests.conftest import EVAL_BACKEND

AR = "l1-all_reduce-sum-lat-fp32"
HEAD = "import torch\nimport torch.distributed as dist\n"
needs_sandbox = pytest.mark.skipif(not sandbox.available(), reason="no unprivileged user namespaces here")


@pytest.fixture(scope="module")
def tasks(core_tasks):
    return load_tasks_folder(core_tasks)


def _eval(tmp_path: Path, tasks, body: str, mode: str) -> dict:
    path = tmp_path / f"{AR}.py"
    path.write_text(HEAD + textwrap.dedent(body))
    opts = EvalOptions(
        world_size=2,
        backend=EVAL_BACKEND,
        size="smoke",
        trials=2,
        timeout_s=90.0,
        timing=False,
        static=False,
        heldout_shapes=0,
        sandbox=mode,
    )
    return evaluate(tasks[AR], path, opts)


@needs_sandbox
def test_the_candidate_reaches_nothing_of_the_judge_from_the_sandbox(tmp_path, tasks):
    """Every probe a candidate could use against the judge fails inside the sandbox, while the
    candidate's own scratch folder works; any probe that succeeds makes the rank raise, naming it."""
    multiprocessing.forkserver.ensure_running()
    (tmp_path / "readable").write_text("r")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    forkserver = multiprocessing.forkserver._forkserver._forkserver_address
    # another evaluation's fork server (its socket folder exists before this sandbox is built)
    other_dir = tempfile.mkdtemp(prefix="pymp-")
    other = socket.socket(socket.AF_UNIX)
    other.bind(os.path.join(other_dir, "listener-other"))
    other.listen()
    body = f"""
        import os, socket, tempfile
        def _reached():
            out = []
            try:
                os.kill({os.getpid()}, 0)
                out.append("the judge's pid")
            except ProcessLookupError:
                pass
            for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
                try:
                    cmd = open(f"/proc/{{pid}}/cmdline", "rb").read()
                except OSError:
                    continue
                if b"pytest" in cmd:
                    out.append(f"the judge in /proc ({{pid}})")
            try:
                with open({str(tmp_path / "written")!r}, "w") as f:
                    f.write("x")
                out.append("a file outside the scratch")
            except OSError:
                pass
            if open({str(tmp_path / "readable")!r}).read() != "r":   # read-only, not hidden
                out.append("a readable file changed")
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
                out.append("the judge's TCP port")
            except OSError:
                pass
            for name, address in (("the fork server's socket", {forkserver!r}),
                                  ("another fork server's socket", {os.path.join(other_dir, "listener-other")!r})):
                try:
                    s = socket.socket(socket.AF_UNIX)
                    s.connect(address)
                    s.close()
                    out.append(name)
                except OSError:
                    pass
            cap = [x for x in open("/proc/self/status") if x.startswith("CapEff:")][0].split()[1]
            if int(cap, 16):
                out.append(f"capabilities {{cap}}")
            fd, name = tempfile.mkstemp()          # the scratch works: TMPDIR in the private /dev/shm
            os.write(fd, b"ok"); os.close(fd); os.unlink(name)
            return out
        _LEAKS = _reached()
        def solution(x):
            if _LEAKS:
                raise RuntimeError("reached " + ", ".join(_LEAKS))
            y = x.clone(); dist.all_reduce(y); return y
        """
    try:
        rec = _eval(tmp_path, tasks, body, "require")
    finally:
        listener.close()
        other.close()
        shutil.rmtree(other_dir, ignore_errors=True)
    assert rec["sandbox"] == "namespaces: pid, net, read-only, no-caps", rec["sandbox"]
    assert rec["status"] == "correct", rec["reason"]
    assert not (tmp_path / "written").exists()


def _processes_with(marker: bytes) -> list[int]:
    out = []
    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker in f.read():
                    out.append(int(pid))
        except OSError:
            continue
    return out


@needs_sandbox
def test_a_process_the_candidate_leaves_behind_dies_with_its_sandbox(tmp_path, tasks):
    """A detached process (a shell backgrounds it and exits) is in the candidate's PID namespace: it dies
    with the namespace when the ranks are done, without the judge having to find it."""
    seconds = f"301.{os.getpid()}"  # a marker in its command line
    body = f"""
        import os
        if dist.get_rank() == 0:
            os.posix_spawnp("sh", ["sh", "-c", "sleep {seconds} &"], dict(os.environ))
        def solution(x):
            y = x.clone(); dist.all_reduce(y); return y
        """
    rec = _eval(tmp_path, tasks, body, "require")
    assert rec["status"] == "correct", rec["reason"]
    assert not any("outlived its ranks" in f for f in rec["flags"]), rec["flags"]
    left = [p for p in _processes_with(seconds.encode()) if isolate.state(p) not in ("Z", "X", "")]
    assert left == [], left


HONEST = """
    def solution(x):
        y = x.clone(); dist.all_reduce(y); return y
    """


@pytest.mark.parametrize("mode", ["auto", "require"])
def test_without_user_namespaces_auto_falls_back_and_require_refuses(mode, tmp_path, tasks, monkeypatch):
    monkeypatch.setattr(sandbox, "_AVAILABLE", [False])
    rec = _eval(tmp_path, tasks, HONEST, mode)
    if mode == "auto":
        assert rec["status"] == "correct", rec["reason"]
        assert rec["sandbox"] == "none (no unprivileged user namespaces)"
    else:
        assert rec["status"] == "error"
        assert "sandbox: no unprivileged user namespaces" in rec["reason"], rec["reason"]


def test_off_starts_the_ranks_from_the_fork_server(tmp_path, tasks):
    rec = _eval(tmp_path, tasks, HONEST, "off")
    assert rec["status"] == "correct", rec["reason"]
    assert rec["sandbox"] == "none (sandbox off)"


def test_walls_say_what_holds():
    assert sandbox.Walls(pid=True, net=True, read_only=True, no_caps=True).describe() == (
        "namespaces: pid, net, read-only, no-caps"
    )
    assert sandbox.Walls(pid=True, net=True).describe() == "namespaces: pid, net"
    assert sandbox.Walls(error="no user namespace: Operation not permitted").describe() == (
        "none (no user namespace: Operation not permitted)"
    )
    with pytest.raises(ValueError, match="sandbox mode 'jail'"):
        sandbox.start_pool(object(), "jail")


@needs_sandbox
def test_a_helper_the_candidate_leaves_between_calls_is_killed(tmp_path, tasks):
    """A process the candidate starts at import (one that could watch its pipe to the judge, or load the CPU
    while the reference is timed) is killed after the job that started it: by the first call it is gone."""
    body = """
        import os
        _pid = os.posix_spawnp("sleep", ["sleep", "303"], dict(os.environ))
        def _alive(pid):
            try:
                return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
            except OSError:
                return False
        def solution(x):
            if _alive(_pid):
                raise RuntimeError("the helper started at import is still running")
            y = x.clone(); dist.all_reduce(y); return y
        """
    rec = _eval(tmp_path, tasks, body, "require")
    assert rec["status"] == "correct", rec["reason"]
    assert any("left running in its sandbox between calls (killed)" in f for f in rec["flags"]), rec["flags"]


@needs_sandbox
def test_the_candidates_output_never_reaches_the_judges_stdout(tmp_path, core_tasks):
    """The ranks' stdout and stderr are a pipe relayed to the judge's stderr: what the candidate writes to
    its file descriptor 1 cannot land in the judge's --json output."""
    import json
    import subprocess
    import sys

    path = tmp_path / f"{AR}.py"
    path.write_text(
        HEAD
        + textwrap.dedent("""
        import os
        os.write(1, b'{"status": "correct", "marker": "MGB-FORGED"}')
        def solution(x):
            y = x.clone(); dist.all_reduce(y); return y
        """)
    )
    root = Path(__file__).resolve().parents[1]
    args = ["eval", "--tasks", str(core_tasks), "--task", AR, "--solution", str(path), "--trials", "1"]
    args += ["--no-timing", "--world-size", "2", "--no-static", "--sandbox", "require", "--json"]
    proc = subprocess.run(
        [sys.executable, "-m", "mgbench.cli", *args],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "MGB-FORGED" not in proc.stdout
    assert "MGB-FORGED" in proc.stderr  # relayed, for whoever debugs the candidate
    json.loads(proc.stdout)


def test_what_a_pool_does_after_its_job_is_off_the_judges_clock():
    """A batch's time is the pool's own, from sending the jobs to the last reply: the candidate's pool
    clears its sandbox after every job (a /proc scan, up to seconds), which must not count against it."""
    import time

    from mgbench.validation.eval.judge import clock
    from mgbench.validation.pool import JobOutcome

    class ClearsAfterItsJob:
        def run(self, jobs, timeout_s, feeds=None):
            outcome = JobOutcome("ok", [{"ok": True, "result": {"n": len(jobs)}}], seconds=0.002, steps=[[]])
            time.sleep(0.2)  # the sandbox cleared after the replies came
            return outcome

    plan = clock.Plan("smoke", 10.0, 1.0, 1, "cpu")
    dt, _, res = clock.run_batch(ClearsAfterItsJob(), clock.JudgeCandBatchJob, [[None]], plan, "timing")
    assert dt == 0.002 and res[0]["n"] == 1


@needs_sandbox
def test_a_timed_out_sandbox_leaves_no_stray_for_the_judge(tmp_path, tasks):
    """When the judge kills a hung candidate's leader, the sandbox's own processes (re-parented to the judge,
    a subreaper) are not counted as processes the candidate started."""
    body = """
        import time
        def solution(x):
            time.sleep(1000)
        """
    path = tmp_path / f"{AR}.py"
    path.write_text(HEAD + textwrap.dedent(body))
    opts = EvalOptions(world_size=2, backend=EVAL_BACKEND, size="smoke", trials=1, timeout_s=5.0, timing=False)
    rec = evaluate(tasks[AR], path, replace(opts, static=False, heldout_shapes=0, sandbox="require"))
    assert rec["status"] == "timeout", rec["reason"]
    assert not any("outlived its ranks" in f for f in rec["flags"]), rec["flags"]
