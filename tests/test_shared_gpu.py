"""The shared-gpu backend: ranks placed round-robin over the visible GPUs (one GPU may hold all), joined
by gloo over CUDA tensors, point-to-point staged through host memory in the rank process. The placement
and the staging path run on CPU here (every tensor staged); the CUDA tests run where a GPU is visible."""

from __future__ import annotations

import json
import types
from collections import Counter
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from probe_jobs import OracleTurnsProbe, P2PPatternsProbe, StagedCallsProbe

from mgbench import backends
from mgbench.generator import generate
from mgbench.store import load_manifest
from mgbench.validation.jobs import PingJob
from mgbench.validation.pool import RankPool
from mgbench.validation.run import check_task

RING_FAMILIES = ["ring_shift", "ring_attention"]  # references built on send/recv and batch_isend_irecv


@given(world_size=st.integers(1, 64), gpus=st.integers(1, 16))
def test_ranks_are_placed_round_robin_over_the_visible_gpus(world_size, gpus):
    placed = backends.placement(world_size, gpus)
    assert all(0 <= g < gpus for g in placed)
    load = Counter(placed)
    assert max(load.values()) - min(load.values()) <= 1  # balanced
    if gpus >= world_size:
        assert placed == list(range(world_size))  # one GPU per rank when there are enough


def test_no_gpu_is_a_clear_error():
    with pytest.raises(ValueError, match="no CUDA device"):
        backends.gpu_of_rank(0, 0)


def test_the_backend_table_says_what_each_mode_is():
    assert backends.NAMES == ("gloo", "nccl", "shared-gpu")
    shared = backends.backend("shared-gpu")
    assert shared.process_group == "gloo" and shared.on_gpu and not shared.gpu_per_rank
    assert shared.stage_p2p_through_host and not shared.timings_are_results
    assert [b.name for b in backends.BACKENDS.values() if b.timings_are_results] == ["nccl"]
    assert [b.name for b in backends.BACKENDS.values() if b.compile_eagerly] == ["shared-gpu"]
    with pytest.raises(ValueError, match="unknown backend 'mpi'.*gloo, nccl, shared-gpu"):
        backends.backend("mpi")


@pytest.mark.sandboxed
@pytest.mark.parametrize("world_size", [2, 4])
def test_staged_point_to_point_delivers_every_pattern(world_size):
    with RankPool(world_size, "gloo", extra_handlers=["p2p_staging_jobs"]) as pool:
        for dtype in ("float32", "bfloat16", "int64"):
            oc = pool.run(P2PPatternsProbe(n=5, dtype=dtype), timeout_s=60)
            assert oc.status == "ok", oc.reason
            for r in oc.results:
                res = r["result"]
                a2a = res["got"].pop("all_to_all")
                assert a2a == [[10.0 * p + r["result"]["rank"]] * 2 for p in range(world_size)]
                assert res["got"] == dict.fromkeys(("send_recv", "isend_irecv", "batch"), res["expected"])
                assert res["staged"]["all_to_all"] >= 1
                assert res["staged"]["send"] >= 1 and res["staged"]["irecv"] >= 2  # the staged path ran


@pytest.fixture(scope="module")
def ring_tasks(tmp_path_factory) -> tuple[Path, list[dict]]:
    out = tmp_path_factory.mktemp("ring") / "out"
    generate(out, families=RING_FAMILIES)
    tasks = [t for t in load_manifest(out) if t["dtype"] == "float32"]
    for t in tasks:
        t["_path"] = str(out / t["module"])
    return out, tasks


@pytest.mark.sandboxed
def test_p2p_references_pass_unchanged_with_staging(ring_tasks):
    """The task text runs as published; only the rank process routes its send/recv through host memory."""
    _, tasks = ring_tasks
    with RankPool(2, "gloo", extra_handlers=["p2p_staging_jobs"]) as pool:
        for t in tasks:
            res = check_task(pool, t, "smoke", "cpu", seed=0, timeout_s=120)
            assert res.status == "passed", (t["task_id"], res.reason)
        staged = pool.run(StagedCallsProbe(), timeout_s=30)
    assert all(sum(r["result"].values()) > 0 for r in staged.results)


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@cuda
@pytest.mark.parametrize("world_size", [2, 4])
def test_shared_gpu_pool_runs_p2p_references_on_one_gpu(ring_tasks, world_size):
    _, tasks = ring_tasks
    with RankPool(world_size, "shared-gpu") as pool:
        assert pool.run(PingJob(), timeout_s=60).results[0]["result"]["sum"] == sum(range(world_size))
        for t in tasks:
            res = check_task(pool, t, "smoke", "cuda", seed=0, timeout_s=120)
            assert res.status == "passed", (t["task_id"], res.reason)
            assert res.peak_memory_bytes and all(b > 0 for b in res.peak_memory_bytes)


@cuda
def test_ranks_on_one_gpu_take_their_oracle_parts_by_cuda_ipc():
    """On a GPU the parts cross as CUDA IPC handles: every other rank opens one, and gets the values the
    host route gives, in its own memory."""
    total = sum(r + 1 for r in range(3))
    with RankPool(3, "shared-gpu", extra_handlers=["oracle_turns_jobs"]) as pool:
        for probe, opened, route in [
            (OracleTurnsProbe(fail_rank=-1, transport="count"), [0, 1, 1], "device"),
            (OracleTurnsProbe(fail_rank=-1, transport="count", handoff="host"), [0, 0, 0], "host"),
        ]:
            oc = pool.run(probe, timeout_s=120)
            assert oc.status == "ok", oc.reason
            res = sorted((r["result"] for r in oc.results), key=lambda r: r["rank"])
            assert [r["out"] for r in res] == [[total * (k + 1)] * 2 for k in range(3)], res
            assert all(r["own_storage"] for r in res) and [r["opened"] for r in res] == opened
            assert {r["route"] for r in res} == {route}, res


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(backends.NAMES), world_size=st.integers(1, 16), gpus=st.integers(0, 16))
def test_a_backend_is_refused_only_where_the_machine_lacks_its_gpus(name, world_size, gpus):
    chosen = backends.backend(name)
    runs = not chosen.on_gpu or (gpus >= 1 and (not chosen.gpu_per_rank or gpus >= world_size))
    shortfall = backends.device_shortfall(name, world_size, gpus)
    assert (shortfall is None) is runs
    if shortfall:  # one line naming the backend asked for and the one to use instead
        assert "\n" not in shortfall and f"--backend {name}" in shortfall and "--backend " in shortfall.split(";")[1]


@pytest.mark.parametrize("command", ["eval", "validate"])
def test_a_gpu_backend_without_a_gpu_is_one_line_and_exit_2_not_a_verdict(
    command, core_tasks, tmp_path, capsys, monkeypatch
):
    from mgbench.cli import main

    monkeypatch.setattr(backends, "visible_gpu_count", lambda: 0)
    if command == "eval":
        solution = tmp_path / "x.py"
        solution.write_text("def solution(x):\n    return x\n")
        task = next(t for t in load_manifest(core_tasks) if {2, 4} <= set(t.get("world_sizes", [2, 4])))
        base = ["eval", "--tasks", str(core_tasks), "--solution", str(solution), "--task", task["task_id"]]
    else:
        base = ["validate", "--out", str(core_tasks)]
    assert main([*base, "--backend", "shared-gpu", "--world-size", "2"]) == 2  # 1 would read as "incorrect"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--backend shared-gpu needs a visible CUDA device" in err[0], err
    monkeypatch.setattr(backends, "visible_gpu_count", lambda: 2)
    assert main([*base, "--backend", "nccl", "--world-size", "4"]) == 2
    assert "needs one GPU per rank: world size 4, 2 GPU(s) visible" in capsys.readouterr().err


def test_eval_checks_the_gpus_of_the_world_sizes_it_would_judge_by_default(core_tasks, tmp_path, capsys, monkeypatch):
    """No --world-size: NCCL on one GPU would still judge the task's smallest world size (2): refused, not
    crashed."""
    from mgbench.cli import main

    monkeypatch.setattr(backends, "visible_gpu_count", lambda: 1)
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("torch.cuda.device_count", lambda: 1)
    solution = tmp_path / "x.py"
    solution.write_text("def solution(x):\n    return x\n")
    task = next(t for t in load_manifest(core_tasks) if 2 in t.get("world_sizes", [2]))
    argv = ["eval", "--tasks", str(core_tasks), "--solution", str(solution), "--task", task["task_id"]]
    assert main([*argv, "--backend", "nccl"]) == 2
    assert "needs one GPU per rank: world size 2, 1 GPU(s) visible" in capsys.readouterr().err


def test_auto_takes_nccl_only_when_every_world_size_asked_has_its_gpus(monkeypatch):
    from mgbench.cli import build_parser
    from mgbench.validation.eval.commands import _backend

    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("torch.cuda.device_count", lambda: 4)
    parse = build_parser().parse_args
    argv = ["eval", "--solution", "x.py", "--dataset", "d", "--world-size", "2", "--world-size"]
    assert _backend(parse([*argv, "4"])) == "nccl"
    assert _backend(parse([*argv, "8"])) == "gloo"


def test_timing_on_shared_gpus_is_refused(capsys):
    from mgbench.cli import main

    assert main(["validate", "--timing", "--backend", "shared-gpu", "--out", "nowhere"]) == 2
    assert "needs one GPU per rank" in capsys.readouterr().err


def _correctness_folder(out: Path, records: list[dict]) -> Path:
    """results/cuda-shared/ as the CUDA pass leaves it: a marker, shared-gpu records and, planted, a
    baselines.jsonl that must never be read as timings."""
    folder = out / "results" / "cuda-shared"
    folder.mkdir(parents=True)
    (folder / "correctness.json").write_text('{"backend": "shared-gpu", "correctness_only": true}\n')
    lines = [
        json.dumps({**r, "backend": "shared-gpu", "hardware": "NVIDIA H100 80GB HBM3", "world_size": ws})
        for r in records
        for ws in (2, 4)
    ]
    (folder / "validation-shared-gpu.jsonl").write_text("\n".join(lines) + "\n")
    planted = {"task_id": records[0]["task_id"], "content_hash": records[0]["content_hash"], "world_size": 2}
    (folder / "baselines.jsonl").write_text(json.dumps({**planted, "baseline": "eager", "median_ms": 0.001}) + "\n")
    return folder


def test_publish_shows_where_each_task_was_checked_and_keeps_timings_from_real_runs(tmp_path):
    pytest.importorskip("datasets")  # the GPU machines run validation without the dataset stage's libraries
    from dataset_helpers import small_out

    from mgbench.dataset.build import write_dataset

    out = small_out(tmp_path / "out")
    nccl = [json.loads(line) for p in (out / "results").glob("*/validation-nccl.jsonl") for line in open(p)]
    before = write_dataset(out, tmp_path / "before", [], results_roots=[out / "results"])
    folder = _correctness_folder(out, nccl)
    after = write_dataset(out, tmp_path / "after", [], results_roots=[out / "results"])
    assert [r["baselines"] for r in after.rows] == [r["baselines"] for r in before.rows]  # no timing from it
    for row in after.rows:
        checked = {(v["backend"], v["world_size"]) for v in row["validation"]}
        assert {("shared-gpu", 2), ("shared-gpu", 4)} <= checked
    card = (tmp_path / "after" / "README.md").read_text()
    shared_row = (
        f"| shared-gpu | NVIDIA H100 80GB HBM3 | 4 | full | {len(after.rows)} | correctness only (ranks share GPUs) |"
    )
    assert shared_row in card
    (folder / "hardware.json").write_text("{}")
    with pytest.raises(ValueError, match="correctness-only folder"):
        write_dataset(out, tmp_path / "again", [], results_roots=[out / "results"])


@pytest.mark.parametrize(
    "record, result",
    [
        ({"backend": "nccl", "size": "full", "hardware": "2x NVIDIA H200"}, False),
        ({"backend": "shared-gpu", "size": "full", "hardware": "4 ranks on 1x NVIDIA H100 (shared)"}, True),
        ({"backend": "gloo", "size": "smoke", "hardware": "x86_64 cpu"}, True),
        ({"backend": "nccl", "size": "smoke", "hardware": "2x NVIDIA H200"}, True),
    ],
)
def test_shared_gpu_timings_are_never_results(record, result):
    from mgbench.validation.eval.verdict import cpu_timing

    assert cpu_timing(record) is result


def test_eval_takes_the_shared_gpu_backend_at_full_size(monkeypatch):
    from mgbench.cli import build_parser
    from mgbench.validation.eval.commands import _options

    monkeypatch.setattr(backends, "visible_gpu_count", lambda: 1)  # one GPU holds every rank
    args = build_parser().parse_args(["eval", "--backend", "shared-gpu", "--solution", "x.py", "--dataset", "d"])
    opts = _options(args)
    assert (opts.backend, opts.size, opts.timeout_s) == ("shared-gpu", "full", 300.0)


SHIPPED_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int64, torch.float16, torch.bfloat16, torch.float32]
SHIPPED_DTYPES += [torch.float64, torch.complex64, torch.complex128, torch.float8_e4m3fn]


@given(
    st.lists(
        st.tuples(st.sampled_from(SHIPPED_DTYPES), st.lists(st.integers(0, 5), max_size=3), st.booleans()),
        min_size=1,
        max_size=6,
    )
)
def test_an_oracle_part_crosses_as_bytes_unchanged(leaves):
    """The shared-GPU handoff sends a part's dense tensors as raw bytes into one buffer: any mix of dtypes,
    odd byte counts, 0-d, empty and non-contiguous tensors, beside non-tensor leaves, comes back equal, with
    the dtype and shape it had and storage of its own."""
    from mgbench.validation.checks import _extents, _pack, _unpack, unchanged

    tensors = []
    for dtype, shape, transposed in leaves:
        t = (torch.randn(shape, dtype=torch.float64) * 50).to(dtype)
        if t.is_complex():  # a lazy conjugate view: bytes only after it is resolved
            t = t.conj()
        tensors.append(t.t() if transposed and t.dim() == 2 else t)
    part = {"out": tuple(tensors), "step": 3, "note": None}
    skeleton, chunks, nbytes = _pack(part)
    payload = torch.full((nbytes,), 0xAB, dtype=torch.uint8)  # what the receiving rank allocates, as garbage
    extents = _extents(skeleton)
    assert len(extents) == len(chunks)
    for (a, b), chunk in zip(extents, chunks):  # each chunk lands where its slot says, as irecv puts it
        payload[a:b] = chunk
    back = _unpack(skeleton, payload, torch.device("cpu"))
    assert back["step"] == 3 and back["note"] is None
    assert unchanged(part, back)
    assert [(t.dtype, t.shape) for t in back["out"]] == [(t.dtype, t.shape) for t in tensors]
    shared = [t for t in back["out"] if t.numel() and t.untyped_storage().data_ptr() == payload.data_ptr()]
    assert not shared


@pytest.mark.sandboxed
def test_ranks_sharing_a_gpu_compute_the_oracle_once_and_each_gets_its_part():
    """N unsharded float64 problems at once do not fit one GPU where one does, and N in turns cost N times
    one: rank 0 computes the oracle once and hands each rank its own part (not a view of the whole output);
    an oracle that fails there fails on every rank, leaving none waiting. Where handing the parts out would
    cost more than solving again, the other ranks solve it in turns, never two at once."""
    with RankPool(3, "gloo", extra_handlers=["oracle_turns_jobs"]) as pool:
        oc = pool.run(OracleTurnsProbe(fail_rank=-1), timeout_s=60)
        assert oc.status == "ok", oc.reason
        res = sorted((r["result"] for r in oc.results), key=lambda r: r["rank"])
        total = sum(r + 1 for r in range(3))  # every rank's inputs hold r + seed, seed 1
        assert [r["out"] for r in res] == [[total * (k + 1)] * 2 for k in range(3)]
        assert [(r["extra"], r["tag"]) for r in res] == [([k, k + 1, k + 2], k) for k in range(3)]
        assert all(r["own_storage"] for r in res)
        assert [len(r["windows"]) for r in res] == [1, 0, 0]  # computed once, on rank 0
        oc = pool.run(OracleTurnsProbe(fail_rank=0), timeout_s=60)
        assert oc.status == "ok", oc.reason
        res = sorted((r["result"] for r in oc.results), key=lambda r: r["rank"])
        assert all("the unsharded problem does not fit" in r["error"] for r in res), res
        # a quick solve with parts too large to hand out cheaply: ranks 1..N-1 solve it again, in turns
        oc = pool.run(OracleTurnsProbe(fail_rank=-1, handoff_bytes_per_s=1.0), timeout_s=60)
        assert oc.status == "ok", oc.reason
        res = sorted((r["result"] for r in oc.results), key=lambda r: r["rank"])
        assert [r["out"] for r in res] == [[total * (k + 1)] * 2 for k in range(3)]
        assert all(r["own_storage"] for r in res) and [len(r["windows"]) for r in res] == [1, 1, 1]
        windows = sorted(w for r in res for w in r["windows"])
        assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:])), windows  # no two solves overlap
        oc = pool.run(OracleTurnsProbe(fail_rank=2, handoff_bytes_per_s=1.0), timeout_s=60)
        assert oc.status == "ok", oc.reason
        res = sorted((r["result"] for r in oc.results), key=lambda r: r["rank"])
        assert [("error" in r) for r in res] == [False, False, True]
        # parts that cannot be handed out fail on every rank at once, none left waiting in a collective
        for broken in ("short", "unpicklable"):
            oc = pool.run(OracleTurnsProbe(fail_rank=-1, broken=broken), timeout_s=30)
            assert oc.status == "ok", (broken, oc.reason)
            assert all("error" in r["result"] for r in oc.results), (broken, oc.results)


@pytest.mark.sandboxed
def test_parts_cross_by_handle_where_a_transport_exists_and_by_host_where_a_rank_cannot_open_one():
    """With a transport for the device (CUDA IPC on a GPU; here a CPU stand-in), rank 0 still solves once and
    every other rank opens its handle and keeps its own copy, even where the host route would solve again.
    If one rank cannot open its handle, every rank gets its part through host memory, with the same values;
    HANDOFF "host" never uses the transport."""
    total = sum(r + 1 for r in range(3))
    want = [[total * (k + 1)] * 2 for k in range(3)]
    with RankPool(3, "gloo", extra_handlers=["oracle_turns_jobs"]) as pool:
        for probe, opened, route in [
            (OracleTurnsProbe(fail_rank=-1, transport="file", handoff_bytes_per_s=1.0), [0, 1, 1], "device"),
            (OracleTurnsProbe(fail_rank=-1, transport="file-fails-on-2"), [0, 1, 0], "host"),
            (OracleTurnsProbe(fail_rank=-1, transport="file", handoff="host"), [0, 0, 0], "host"),
        ]:
            oc = pool.run(probe, timeout_s=60)
            assert oc.status == "ok", (probe, oc.reason)
            res = sorted((r["result"] for r in oc.results), key=lambda r: r["rank"])
            assert all("error" not in r for r in res), (probe, res)
            assert [r["out"] for r in res] == want, probe
            assert [(r["extra"], r["tag"]) for r in res] == [([k, k + 1, k + 2], k) for k in range(3)]
            assert all(r["own_storage"] for r in res)
            assert [len(r["windows"]) for r in res] == [1, 0, 0], probe  # solved once, on rank 0
            assert [r["opened"] for r in res] == opened, probe
            assert {r["route"] for r in res} == {route}, (probe, res)
        oc = pool.run(OracleTurnsProbe(fail_rank=0, transport="file"), timeout_s=60)
        assert all("the unsharded problem does not fit" in r["result"]["error"] for r in oc.results)


def test_only_trees_of_plain_tensors_cross_by_handle():
    """A part crosses by handle only if copy_tree can copy every tensor in it out of rank 0's memory: an
    object could hide one, and a tensor with autograd or attributes would lose them."""
    from mgbench.validation import part_transport

    cpu = torch.device("cpu")

    class Everything:
        name = "all"

        def shareable(self, t):
            return part_transport._plain(t)

    part_transport.TRANSPORTS["cpu"] = Everything()
    try:
        plain = ({"a": torch.ones(2), "n": 3, "d": torch.float64}, [torch.zeros(1), None])
        assert part_transport.transport_for([plain, plain], cpu, 3) is not None
        copied = part_transport.copy_tree(plain, cpu)
        assert torch.equal(copied[0]["a"], plain[0]["a"]) and copied[0]["a"].data_ptr() != plain[0]["a"].data_ptr()
        hidden = types.SimpleNamespace(t=torch.ones(2))
        grad = torch.ones(2, requires_grad=True)
        tagged = torch.ones(2)
        tagged.main_grad = torch.zeros(2)
        keyed = {torch.ones(1): 1}  # a tensor as a key would stay a mapping of rank 0's memory
        for odd in (hidden, (grad,), [tagged], torch.ones(2, dtype=torch.complex64).conj(), keyed):
            assert part_transport.transport_for([plain, odd], cpu, 3) is None, odd
        # after a fallback, this process hands nothing by handle again (a handle never opened stays counted)
        part_transport.give_up(cpu)
        assert part_transport.transport_for([plain, plain], cpu, 3) is None
    finally:
        part_transport.TRANSPORTS.pop("cpu")
        part_transport.GIVEN_UP.clear()
    assert part_transport.transport_for([plain], cpu, 2) is None  # no transport for host memory


def test_compiled_functions_run_eagerly_where_the_backend_says_so():
    """run_compiled_eagerly (what a shared-gpu rank calls at start) makes a torch.compile'd function run as
    plain Python: inside it torch.compiler.is_compiling() is then False, where dynamo's trace says True.
    In a child process: the setting is process-wide."""
    import subprocess
    import sys

    probe = (
        "import torch\n"
        "@torch.compile(backend='eager')\n"
        "def f(x):\n"
        "    return x + 1, torch.compiler.is_compiling()\n"
        "print(f(torch.ones(2))[1])\n"
        "from mgbench.validation.worker import run_compiled_eagerly\n"
        "run_compiled_eagerly()\n"
        "@torch.compile(backend='eager')\n"
        "def g(x):\n"
        "    return x + 2, torch.compiler.is_compiling()\n"
        "print(f(torch.ones(3))[1], g(torch.ones(2))[1])\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split() == ["True", "False", "False"]
