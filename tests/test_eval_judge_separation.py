"""The judge out of the candidate's reach (issue 44): cheats of 15 classes that the in-process
harness judged correct, written anew from their descriptions, against the judge (gloo, smoke, world
size 2; mgbench.validation.eval.judge). Each is rejected with the rule that names what was
detected, or, where the cheat only tries to steal time, is timed with the stolen time counted (the
effect it would have had is 10x or more past any noise of 2 shared CPU cores). Honest solutions of
three other algorithms pass at world sizes 2 and 4. a5 is one the judge itself once let through (a
decoy answered on each rank from the earlier call's answer, while every rank swapped alike)."""

from __future__ import annotations

import os
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mgbench.validation.eval.judge import sandbox
from mgbench.validation.eval.runner import REWRITE_PHASE, EvalOptions, evaluate
from mgbench.validation.eval.tasks import load_tasks_folder
from tests.conftest import EVAL_BACKEND

pytestmark = pytest.mark.sandboxed

AR = "l1-all_reduce-sum-lat-fp32"
GEMM = "l2-ag_gemm-fp32"
HEAD = "import torch\nimport torch.distributed as dist\n"
HELDOUT = Path(__file__).resolve().parents[1] / "benchmarks" / "heldout_cheats"
TRIALS = 2  # calls 1 and 2 are the correctness trials; the cheats below switch on at call 3 (timing)

# the stall or patched statistic each timing cheat would gain is far beyond this
NOT_CREDITED = 5.0

# the fork server's other children, the reference ranks among them (the c4 and c5 cheats act on them)
SIBLINGS = """
        import os
        def _siblings():
            me, parent = os.getpid(), os.getppid()
            for name in os.listdir("/proc"):
                if name.isdigit() and int(name) != me:
                    try:
                        with open(f"/proc/{name}/stat") as f:
                            if int(f.read().rsplit(")", 1)[1].split()[1]) == parent:
                                yield int(name)
                    except OSError:
                        pass"""

CHEATS = {
    # -- (a) wrong outputs judged correct ------------------------------------------------------
    "a1_kernel_on_unwatched_aten_op": (
        AR,
        """
        _lib = torch.library.Library("at" + "en", "IMPL", "CPU")   # namespace built at run time
        _lib.impl("abs.out", lambda self, out: out.zero_(), "CPU")  # not an operator the guard watches
        def solution(x):
            return x * dist.get_world_size()          # no communication: wrong
        """,
        ["rule values"],
    ),
    "a2_format_reflection_rewrites_tolerances": (
        AR,
        """
        import multiprocessing, string
        _F = string.Formatter()
        def _get(root, path):                         # attribute walk by str.format's field parser
            return _F.get_field("0." + path, (root,), {})[0]
        _worker = _get(multiprocessing.current_process(), "_target.__globals__")
        if "HANDLERS" not in _worker:                 # the ranks run under the sandbox's leader
            _worker = _get(_worker["worker_main"], "__globals__")
        for _entry in list(_worker["HANDLERS"].values()):
            _fn = _entry[-1] if isinstance(_entry, tuple) else _entry   # (record type, handler)
            for _name, _mod in list(_get(_fn, "__globals__").items()):
                for _attr in ("ATOL_REL_MAX", "TOL_FACTOR", "TIMED_TOL_FACTOR", "VERIFY_RATE"):
                    if hasattr(_mod, _attr):
                        setattr(_mod, _attr, 1e9)
                for _attr in ("RTOL", "ATOL_REL_FLOOR"):
                    _d = getattr(_mod, _attr, None)
                    if isinstance(_d, dict):
                        for _k in _d:
                            _d[_k] = 1e9
        def solution(x):
            return x * dist.get_world_size()
        """,
        ["rule values"],
    ),
    "a3_replaced_random_picks_the_verified_calls": (
        AR,
        """
        import random
        random.random = lambda: 0.999                 # "never verify"
        random.Random.random = lambda self: 0.999
        random.Random.randrange = lambda self, *a, **k: 0
        random.randrange = lambda *a, **k: 0
        _n = [0]
        def solution(x):
            _n[0] += 1
            if _n[0] <= 2:
                y = x.clone(); dist.all_reduce(y); return y
            return x * dist.get_world_size()
        """,
        ["rule timed_values"],
    ),
    "a4_c10d_kernel_agrees_with_the_wrong_answer": (
        AR,
        """
        _inside = [False]
        def _kernel(tensors, pg, op, sparse, async_op=True, timeout=-1):
            be = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
            floats = all(t.is_floating_point() for t in tensors)
            if floats and not _inside[0]:             # a re-run of the reference: agree with the cheat
                for t in tensors:
                    t.mul_(dist.get_world_size())
                return tensors, be.allreduce([torch.zeros(1)]).boxed()
            o = dist.AllreduceOptions()
            o.reduceOp = dist.ReduceOp.SUM if floats else dist.ReduceOp.MAX
            return tensors, be.allreduce(tensors, o).boxed()
        _lib = torch.library.Library("c10" + "d", "IMPL")
        _lib.impl("allreduce_", _kernel, "CPU")
        _n = [0]
        def solution(x):
            _n[0] += 1
            _inside[0] = True
            try:
                if _n[0] <= 2:
                    y = x.clone(); dist.all_reduce(y); return y
                return x * dist.get_world_size()
            finally:
                _inside[0] = False
        """,
        ["rule timed_values"],
    ),
    "a5_decoy_answered_locally_from_the_earlier_call": (
        AR,
        # the second held-out set's candidate, but for when it forgets its recent calls: its author's rule (a
        # gap of 2 ms between calls) is met on one rank and not on another now that calls are streamed, and
        # ranks that decide apart leave a collective unmatched (a timeout, not the verdict tested here)
        (HELDOUT / "l1-all_reduce-sum-bw-fp16@decoy_answered_locally.py")
        .read_text()
        .replace("if now - _last[0] > 0.002:", "if False:"),
        ["rule timed_values"],
    ),
    # -- (b) work moved out of the timed calls --------------------------------------------------
    "b1_finalizer_finishes_the_work": (
        AR,
        """
        import weakref
        _n = [0]
        def solution(x):
            _n[0] += 1
            y = x.clone()
            if _n[0] <= 2:
                dist.all_reduce(y); return y
            weakref.finalize(x, dist.all_reduce, y)   # runs when the harness drops the inputs
            return y
        """,
        [("rule timed_commit", "rule timed_values")],
    ),
    "b2_keeps_input_sets_reduces_them_at_once": (
        AR,
        """
        _store = {}                                   # key -> [the input set, its answer]
        def solution(x):
            f = x.reshape(-1)
            key = (f.numel(), float(f[0]), float(f[-1]))
            hit = torch.tensor([float(key in _store and _store[key][1] is not None)])
            dist.all_reduce(hit, op=dist.ReduceOp.MIN)    # every rank takes the same branch
            if hit.item():
                return _store[key][1].clone()
            _store[key] = [x, None]
            todo = [k for k, v in _store.items() if v[1] is None]
            flat = torch.cat([_store[k][0].reshape(-1) for k in todo])
            dist.all_reduce(flat)                     # every kept set reduced in one collective
            for k, part in zip(todo, flat.split([_store[k][0].numel() for k in todo])):
                _store[k][1] = part.reshape(_store[k][0].shape)
            return _store[key][1].clone()
        """,
        ["rule timed_values"],
    ),
    "b4_cache_over_integer_and_0d_inputs": (
        "planted-int-0d",
        """
        _cache = {}
        def solution(x, idx, scale):
            key = (tuple(idx.tolist()), float(scale))   # integer and 0-d inputs: never perturbed before
            hit = torch.tensor([float(key in _cache)])
            dist.all_reduce(hit, op=dist.ReduceOp.MIN)
            if hit.item():
                return _cache[key].clone()
            y = x * scale
            dist.all_reduce(y)
            _cache[key] = y[idx]
            return _cache[key].clone()
        """,
        ["rule timed_values"],
    ),
    "b5_overwrites_the_timed_inputs": (
        AR,
        """
        _n = [0]
        def solution(x):
            _n[0] += 1
            y = x.clone()
            dist.all_reduce(y)
            if _n[0] > 2:
                x.copy_(y)                            # a later call on this set would need no collective
            return y
        """,
        ["rule timed_inputs"],
    ),
    # -- (c) speed credited for sabotage or forged timing ---------------------------------------
    "c4_idle_policy_on_the_reference_processes": (
        AR,
        SIBLINGS
        + """
        for _pid in _siblings():
            try:
                os.setpriority(os.PRIO_PROCESS, _pid, 19)
            except OSError:
                pass
        def solution(x):
            y = x.clone(); dist.all_reduce(y); return y
        """,
        ["rule interference"],
    ),
    "c5_affinity_pins_the_reference_processes": (
        AR,
        SIBLINGS
        + """
        _one = {min(os.sched_getaffinity(0))}
        for _pid in _siblings():
            for _tid in os.listdir(f"/proc/{_pid}/task"):
                try:
                    os.sched_setaffinity(int(_tid), _one)   # every reference thread on one CPU
                except OSError:
                    pass
        def solution(x):
            y = x.clone(); dist.all_reduce(y); return y
        """,
        ["rule interference", "cpus"],
    ),
    # -- (d) precision ---------------------------------------------------------------------------
    "d1_autocast_left_on": (
        GEMM,
        """
        torch.autocast("cuda" if torch.cuda.is_available() else "cpu", dtype=torch.bfloat16).__enter__()
        def solution(x, w):                           # autocast above is never exited
            full = x.new_empty(x.shape[0] * dist.get_world_size(), x.shape[1])
            dist.all_gather_into_tensor(full, x)
            return (full @ w).float()                 # a bfloat16 product passed off as float32
        """,
        ["rule values"],
    ),
}

# cheats that only steal time: judged correct, their time counted, never credited
TIME_CHEATS = {
    "b3_async_collective_not_waited": """
        _n = [0]
        _pad = {}
        def solution(x):
            _n[0] += 1
            y = x.clone()
            if _n[0] <= 2:
                dist.all_reduce(y); return y
            dist.all_reduce(y, async_op=True)         # started, never waited for
            p = _pad.setdefault("p", torch.zeros(1 << 22))
            dist.all_reduce(p, async_op=True)         # 16 MB more, also never waited for
            return y
        """,
    "c1_c10d_kernel_stalls_the_reference": """
        import time
        _inside = [False]
        def _kernel(tensors, pg, op, sparse, async_op=True, timeout=-1):
            be = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
            floats = all(t.is_floating_point() for t in tensors)
            if floats and not _inside[0]:
                time.sleep(0.05)                      # only the reference's collectives are slow
            o = dist.AllreduceOptions()
            o.reduceOp = dist.ReduceOp.SUM if floats else dist.ReduceOp.MAX
            return tensors, be.allreduce(tensors, o).boxed()
        _lib = torch.library.Library("c10" + "d", "IMPL")
        _lib.impl("allreduce_", _kernel, "CPU")
        def solution(x):
            _inside[0] = True
            try:
                y = x.clone(); dist.all_reduce(y); return y
            finally:
                _inside[0] = False
        """,
    "c2_idle_policy_outside_its_own_calls": """
        import os, threading, time
        _inside = [False]
        def _spin():                                  # competes with whatever runs between its calls
            while True:
                if _inside[0]:
                    time.sleep(0.001)
                else:
                    t = time.perf_counter()
                    while time.perf_counter() - t < 0.002:
                        pass
                    time.sleep(0)
        threading.Thread(target=_spin, daemon=True).start()
        def _policy(idle):
            try:
                os.sched_setscheduler(0, os.SCHED_IDLE if idle else os.SCHED_OTHER, os.sched_param(0))
            except (OSError, AttributeError):
                pass
        def solution(x):
            _inside[0] = True
            _policy(False)
            try:
                y = x.clone(); dist.all_reduce(y); return y
            finally:
                _policy(True)                         # the harness's code after it runs idle
                _inside[0] = False
        """,
    "c3_replaced_stdlib_median": """
        import statistics
        statistics.median = lambda xs: 1e-9          # the timing statistics' median, everywhere it can reach
        statistics.fmean = lambda xs: 1e-9
        def solution(x):
            y = x.clone(); dist.all_reduce(y); return y
        """,
}

HONEST = {
    "rs_ag_allreduce": (
        AR,
        """
        def solution(x):
            ws = dist.get_world_size()
            flat = x.reshape(-1)
            pad = (-flat.numel()) % ws
            buf = torch.cat([flat, flat.new_zeros(pad)]) if pad else flat.clone()
            part = buf.new_empty(buf.numel() // ws)
            dist.reduce_scatter_tensor(part, buf)
            out = torch.empty_like(buf)
            dist.all_gather_into_tensor(out, part)
            return out[: flat.numel()].reshape(x.shape)
        """,
    ),
    "ring_allreduce_isend_irecv": (
        AR,
        """
        def solution(x):
            ws, r = dist.get_world_size(), dist.get_rank()
            chunks = list(x.reshape(-1).clone().tensor_split(ws))
            right, left = (r + 1) % ws, (r - 1) % ws
            for step in range(ws - 1):                # reduce-scatter around the ring
                s, d = (r - step) % ws, (r - step - 1) % ws
                recv = torch.empty_like(chunks[d])
                ops = [dist.P2POp(dist.isend, chunks[s], right), dist.P2POp(dist.irecv, recv, left)]
                for w in dist.batch_isend_irecv(ops):
                    w.wait()
                chunks[d] = chunks[d] + recv
            for step in range(ws - 1):                # all-gather around the ring
                s, d = (r + 1 - step) % ws, (r - step) % ws
                recv = torch.empty_like(chunks[d])
                ops = [dist.P2POp(dist.isend, chunks[s], right), dist.P2POp(dist.irecv, recv, left)]
                for w in dist.batch_isend_irecv(ops):
                    w.wait()
                chunks[d] = recv
            return torch.cat(chunks).reshape(x.shape)
        """,
    ),
    "all_gather_then_gemm": (
        GEMM,
        """
        def solution(x, w):
            parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
            dist.all_gather(parts, x.contiguous())
            return torch.cat(parts) @ w
        """,
    ),
}

PLANTED = """
import torch
import torch.distributed as dist
SIZES = {"smoke": {"n": 512}, "full": {"n": 512}}
def _g(seed, stream):
    return torch.Generator().manual_seed((seed * 1000003 + stream * 7919 + 17) % (2**63 - 1))
def make_inputs(rank, world_size, *, seed, device, size="full"):
    n = SIZES[size]["n"]
    x = torch.randn(n, generator=_g(seed, 1 + rank)).to(device)
    idx = torch.randperm(n, generator=_g(seed, 0)).to(device)
    scale = (torch.rand((), generator=_g(seed, 0)) + 0.5).to(device)
    return (x, idx, scale)
def solution(x, idx, scale):
    y = x * scale
    dist.all_reduce(y)
    return y[idx]
def oracle(inputs_per_rank, world_size):
    s = sum(i[0].double() * i[2].double() for i in inputs_per_rank)
    return [s[i[1]] for i in inputs_per_rank]
"""


@pytest.fixture(scope="module")
def tasks(core_tasks, tmp_path_factory):
    from tests.conftest import write_planted

    out = write_planted(tmp_path_factory.mktemp("planted"), {"planted-int-0d": PLANTED})
    return {**load_tasks_folder(core_tasks), **load_tasks_folder(out)}


def _eval(
    tmp_path: Path, tasks, task: str, body: str, world_size: int = 2, sandbox: str = "auto", **options: Any
) -> dict:
    """`body` judged on `task` at smoke size; `options` replace EvalOptions fields set here."""
    path = tmp_path / f"{task}.py"
    path.write_text(HEAD + textwrap.dedent(body))
    opts = EvalOptions(
        world_size=world_size,
        backend=EVAL_BACKEND,
        size="smoke",
        trials=TRIALS,
        timeout_s=90.0,
        budget_s=0.3,
        min_iters=20,
        static=False,
        # these candidates aim at the judge's verification and timing: a held-out shape's trial (before
        # timing; its own suite is test_eval_shapes.py) would reject the ones that turn wrong after a few
        # calls first, under its rule instead of the one tested here
        heldout_shapes=0,
        sandbox=sandbox,
    )
    return evaluate(tasks[task], path, replace(opts, **options))


# Cheats that act on the reference's processes through the operating system: in the sandbox they find
# none (judge/sandbox.py); without it (--sandbox off, or a kernel without user namespaces) the judge's
# interference check is what rejects them.
OS_ROUTES = {"c4_idle_policy_on_the_reference_processes", "c5_affinity_pins_the_reference_processes"}
needs_sandbox = pytest.mark.skipif(not sandbox.available(), reason="no unprivileged user namespaces here")


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_cheat_is_rejected_by_the_judge(name, tmp_path, tasks):
    task, body, words = CHEATS[name]
    rec = _eval(tmp_path, tasks, task, body, sandbox="off" if name in OS_ROUTES else "auto")
    assert rec["status"] == "incorrect", (name, rec["status"], rec["reason"])
    for w in words:
        assert any(x in rec["reason"] for x in ((w,) if isinstance(w, str) else w)), (name, rec["reason"])


def test_work_deferred_to_the_last_call_of_a_batch_is_caught(tmp_path, tasks, monkeypatch):
    """The held-out fused_deferred candidate learns the batch length from its warm batch, returns empty
    outputs for calls 2..k-1 and fills them with one all-reduce in call k (credited 5-10x on CPU when every
    batch had k calls). Batches now vary in length (clock.Plan.batch_len): one that ends before the call
    the candidate counts on leaves outputs unfilled when they are fingerprinted."""
    heldout = Path(__file__).resolve().parents[1] / "benchmarks" / "heldout_cheats"
    # batches of tens of calls (on a loaded machine too), so the length it learns is never under 3: under 3
    # it stays honest, as it may on the bandwidth-bound task of its file name (k about 5, a first batch of 2)
    from mgbench.validation.eval.judge import clock

    monkeypatch.setattr(clock, "BATCH_S", 0.1)
    path = tmp_path / f"{AR}.py"
    path.write_text((heldout / "l1-all_reduce-sum-bw-fp16@fused_deferred.py").read_text())
    opts = EvalOptions(world_size=2, backend=EVAL_BACKEND, size="smoke", static=False, heldout_shapes=0)
    rec = evaluate(tasks[AR], path, opts)
    if rec["status"] == "error":
        # with calls streamed, each rank sees its own gaps between calls: the ranks may learn different
        # batch lengths from their bursts, and the all-reduce the candidate uses to agree on one then has
        # no partner (gloo aborts the rank). Not credited either way
        assert "process died" in rec["reason"], rec["reason"]
        return
    assert rec["status"] == "incorrect", (rec["reason"], rec["speedup"])
    assert "rule timed_values" in rec["reason"] or "rule timed_commit" in rec["reason"], rec["reason"]


def test_a_timed_batch_that_hangs_is_timed_out_at_the_batch_bound(tmp_path, tasks):
    """A timed batch that does not end (ranks out of step: streamed calls let one rank run ahead of the
    others, and one left waiting for a collective they never join hangs the batch; here, a rank that
    sleeps) is timed out at the batch's bound (clock.SLOWER_BOUND times the reference's batch, at least
    clock.MIN_BATCH_BOUND_S), not at --timeout. The timeout is far above the bound: the bound scales with the
    reference's warm-up, and one slow warm-up on a loaded 2-core machine once put it past a 90 s timeout."""
    from mgbench.validation.eval.judge import clock

    timeout = 300.0

    body = f"""
        import time
        _calls = [0]
        def solution(x):
            _calls[0] += 1
            y = x.clone()
            if _calls[0] > {TRIALS} + 4 and dist.get_rank() == 1:
                time.sleep(3600)
            dist.all_reduce(y)
            return y
    """
    rec = _eval(tmp_path, tasks, AR, body, timeout_s=timeout)
    assert rec["status"] == "timeout", (rec["status"], rec["reason"])
    assert f"{clock.SLOWER_BOUND}x the reference's" in rec["reason"], rec["reason"]
    assert rec["seconds"] < timeout - clock.MIN_BATCH_BOUND_S, rec["seconds"]


def test_a_timed_output_unfinished_when_its_call_returns_is_caught(tmp_path, tasks):
    """Timed calls return with their all-reduce still running (rank 1 joins it 5 ms late), and the batch's
    end would finish it: each output is fingerprinted when its call returns, so the output revealed later
    does not match (the held-out cadence_async_when_timed overlapped its calls this way, judged correct
    while outputs were fingerprinted at the batch's end)."""
    body = f"""
        import time
        _calls, _pending = [0], []
        def solution(x):
            _calls[0] += 1
            y = x.clone()
            if _calls[0] <= {TRIALS}:  # the correctness trials come first, one call at a time
                dist.all_reduce(y)
                return y
            if dist.get_rank() == 1:
                time.sleep(0.005)
            _pending.append(dist.all_reduce(y, async_op=True))
            del _pending[:-64]
            return y
    """
    rec = _eval(tmp_path, tasks, AR, body)
    assert rec["status"] == "incorrect", (rec["reason"], rec["speedup"])
    assert "timing (candidate)" in rec["reason"] and "rule timed_commit" in rec["reason"], rec["reason"]


@needs_sandbox
@pytest.mark.parametrize("name", sorted(OS_ROUTES))
def test_os_route_cheat_reaches_no_reference_process_in_the_sandbox(name, tmp_path, tasks):
    """In the sandbox the same candidates see only their own ranks: what they do to them changes
    nothing of the judge's or the reference's, and their (honest) answers are judged correct."""
    task, body, _ = CHEATS[name]
    rec = _eval(tmp_path, tasks, task, body, sandbox="require")
    assert rec["sandbox"].startswith("namespaces: pid, net"), rec["sandbox"]
    assert rec["status"] == "correct", (name, rec["reason"])


@pytest.mark.parametrize("name", sorted(TIME_CHEATS))
def test_time_cheat_gets_no_speed(name, tmp_path, tasks):
    rec = _eval(tmp_path, tasks, AR, TIME_CHEATS[name])
    if name == "b3_async_collective_not_waited":
        # timed: each output is fingerprinted when its call returns, so an unfinished collective leaves a
        # fingerprint that the output revealed later does not match; the trials after timing read the
        # output when solution() returns too. Either is wrong whenever the collective has not finished
        # by then; when it always has, the 16 MB more per call are on the clock
        if rec["status"] == "incorrect":
            late_trial = any(p in rec["reason"] for p in ("trial after timing", REWRITE_PHASE))
            assert "rule timed_commit" in rec["reason"] or (
                late_trial and ("rule values" in rec["reason"] or "rule side_stream" in rec["reason"])
            ), rec["reason"]
            return
        assert rec["status"] == "correct" and rec["speedup"] < 0.5, (rec["reason"], rec["speedup"])
    assert rec["status"] == "correct", (name, rec["reason"])
    assert rec["speedup"] < NOT_CREDITED, (name, rec["speedup"], rec["timing"])
    # the reference was timed in processes that never loaded the candidate, with the candidate's stopped
    assert rec["timing"]["candidate_processes_stopped"] >= 2, rec["timing"]


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_solution_is_correct(name, world_size, tmp_path, tasks):
    task, body = HONEST[name]
    rec = _eval(tmp_path, tasks, task, body, world_size)
    assert rec["status"] == "correct", (name, rec["reason"])
    assert rec["timing"]["candidate_timed_checks"]["verified"] >= 2


def test_forged_reply_cannot_run_code_in_the_judge(tmp_path, tasks):
    """A candidate that writes its own pickle (one that would run a command) into its pipe to the
    judge: the judge decodes plain data only, so nothing runs and the evaluation fails."""
    marker = tmp_path / "pwned"
    body = f"""
        import multiprocessing, os, pickle
        class _Boom:
            def __reduce__(self):
                return (os.system, ("touch {marker}",))
        def solution(x):
            _args = multiprocessing.current_process()._args
            conn = _args[4] if len(_args) > 4 else _args[1][dist.get_rank()]   # under the sandbox's leader
            conn.send_bytes(pickle.dumps({{"ok": True, "result": {{"reason": ""}}, "x": _Boom()}}))
            y = x.clone(); dist.all_reduce(y); return y
        """
    rec = _eval(tmp_path, tasks, AR, body)
    assert rec["status"] != "correct", rec["reason"]
    assert "ProtocolError" in rec["reason"] or "protocol" in rec["reason"], rec["reason"]
    assert not marker.exists() and not os.path.exists(marker)


def test_processes_the_candidate_detaches_die_before_its_verdict(tmp_path, tasks):
    """A candidate whose rank starts a process outside its own tree (a shell that backgrounds it and
    exits, so it is re-parented away from the ranks): the judge, a child subreaper, gets it, stops it
    with the candidate while the reference is timed, and kills it before the verdict is written."""
    pidfile = tmp_path / "stray.pid"
    body = f"""
        import os
        if dist.get_rank() == 0:
            os.posix_spawnp("sh", ["sh", "-c", "sleep 300 & echo $! > {pidfile}"], dict(os.environ))
        def solution(x):
            y = x.clone(); dist.all_reduce(y); return y
        """
    rec = _eval(tmp_path, tasks, AR, body, sandbox="off")  # in the sandbox: tests/test_eval_sandbox.py
    pid = int(pidfile.read_text())
    assert rec["status"] == "correct", rec["reason"]
    assert any("outlived its ranks (killed)" in f for f in rec["flags"]), rec["flags"]
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        state = "gone"
    assert state in ("gone", "Z", "X"), (pid, state)


def _trials_only(tmp_path: Path, tasks, body: str, sandbox: str) -> dict:
    """`body` judged on the all-reduce task without timing: its trials and one held-out shape."""
    return _eval(tmp_path, tasks, AR, body, sandbox=sandbox, timing=False, heldout_shapes=1)


def test_a_limit_on_one_reference_rank_is_seen_though_its_pool_is_torn_down(tmp_path, tasks):
    """The candidate caps the address space of one reference rank only: that rank fails alone at the held-out
    trial, the pool is torn down (its other rank waits inside the job), and the changed limit, read just
    before (runner.JudgePool.restart), still rejects the candidate instead of the shape being skipped."""
    body = (
        SIBLINGS
        + """
        import resource, time
        _calls = [0]
        _mine = "/tmp/.mgb_cap_one_" + os.environ.get("MASTER_PORT", "") + str(os.getppid())
        def solution(x):
            _calls[0] += 1
            if _calls[0] == 1:
                with open(_mine, "a") as f:
                    f.write(f"{os.getpid()}\\n")
            if _calls[0] == 2 and dist.get_rank() == 0:     # the last published trial: the held-out one is next
                time.sleep(0.2)
                ours = {int(p) for p in open(_mine).read().split()}
                refs = sorted(p for p in _siblings() if p not in ours)
                if refs:
                    resource.prlimit(refs[0], resource.RLIMIT_AS, (1 << 28, resource.RLIM_INFINITY))
            y = x.clone(); dist.all_reduce(y)
            return y if x.numel() == 4096 else torch.zeros_like(y)   # wrong anywhere else
        """
    )
    try:
        rec = _trials_only(tmp_path, tasks, body, "off")
    finally:
        for mark in Path("/tmp").glob(".mgb_cap_one_*"):
            mark.unlink(missing_ok=True)
    assert rec["status"] == "incorrect", rec["reason"]
    assert "held-out shape 1" in rec["reason"] and "rule interference" in rec["reason"], rec["reason"]


def _caps_the_reference(address_space: int) -> str:
    """A candidate right only at the published size that sets its sibling processes' address-space limit (the
    reference ranks', outside a sandbox) just before the held-out trial."""
    return (
        SIBLINGS
        + """
        import resource
        _calls = [0]
        def solution(x):
            _calls[0] += 1
            if _calls[0] == 2 and dist.get_rank() == 0:     # the last published trial: the held-out one is next
                for _pid in _siblings():
                    try:
                        resource.prlimit(_pid, resource.RLIMIT_AS, (__CAP__, resource.RLIM_INFINITY))
                    except (OSError, ValueError):
                        pass
            y = x.clone(); dist.all_reduce(y)
            return y if x.numel() == 4096 else torch.zeros_like(y)   # wrong anywhere else
        """.replace("__CAP__", str(address_space))
    )


def test_a_limit_changed_on_the_reference_is_the_reason_even_when_the_reference_still_runs(tmp_path, tasks):
    """The same cheat with a limit the reference never reaches: the reference runs the held-out shape, the
    candidate's answer there is wrong, and the changed limit is still the reason. (With the address-space cap,
    whether the reference failed depended on its allocator having to map more memory: the verdict's rule
    flipped between interference and heldout_shape from run to run.)"""
    rec = _trials_only(tmp_path, tasks, _caps_the_reference(1 << 44), "off")
    assert rec["status"] == "incorrect", rec["reason"]
    assert "held-out shape 1" in rec["reason"] and "rule interference" in rec["reason"], rec["reason"]


@pytest.mark.parametrize("mode", ["off", pytest.param("require", marks=needs_sandbox)])
def test_a_held_out_shape_the_candidate_makes_the_reference_fail_is_not_skipped(mode, tmp_path, tasks):
    """A candidate right only at the published size that caps the reference ranks' address space (prlimit on a
    process of the same user) just before the held-out trial: the reference fails there, and the judge, which
    would skip a shape the reference itself cannot run, sees the changed limit and rejects the candidate."""
    rec = _trials_only(tmp_path, tasks, _caps_the_reference(1 << 28), mode)
    assert rec["status"] == "incorrect", rec["reason"]
    assert "held-out shape 1" in rec["reason"], rec["reason"]
    if mode == "off":  # the reference's limit changed: seen
        assert "rule interference" in rec["reason"], rec["reason"]
    else:  # the sandbox: its siblings are its own ranks, the reference runs the shape, its answer is wrong there
        assert "rule interference" not in rec["reason"], rec["reason"]
