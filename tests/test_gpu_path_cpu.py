"""The GPU validation path, exercised on CPU: timing statistics on gloo, communication-byte
interception, roofline arithmetic, topology parsing, and the GPU pass end to end (gloo, smoke
size) with a hung task aborted within its timeout while the run goes on."""

from __future__ import annotations

import json
import time

import pytest
import torch
from conftest import GOOD_SOLUTION, PLANTED_HEADER, write_planted
from probe_jobs import CommProbe, TimingProbe

from mgbench.store import read_jsonl
from mgbench.validation import topology
from mgbench.validation.gpu import report as gpu_report
from mgbench.validation.gpu import roofline as rl
from mgbench.validation.gpu.run import GpuRun, GpuRunConfig, noise
from mgbench.validation.pool import RankPool
from mgbench.validation.timing import copies_needed, quantile, summarize

MB = 2**20


# --- pure arithmetic -------------------------------------------------------------------------
def test_summary_statistics():
    st = summarize([5.0, 1.0, 2.0, 3.0, 4.0])
    assert (st.median_ms, st.iters) == (3.0, 5)
    assert st.p10_ms == pytest.approx(1.4) and st.p90_ms == pytest.approx(4.6)
    assert st.cv == pytest.approx(2**0.5 / 3)
    assert quantile([7.0], 0.9) == 7.0


def test_rotation_spans_l2():
    n, flush = copies_needed(1 * MB, 50 * MB)
    assert n == 100 and not flush
    assert copies_needed(512 * MB, 50 * MB) == (2, False)  # big sets: two copies suffice
    n, flush = copies_needed(1024, 50 * MB)  # tiny sets: capped, plus a flush
    assert n == 256 and flush


def _n(monkeypatch, n, r=0):
    monkeypatch.setattr(rl, "_group", lambda a: (n, r))
    monkeypatch.setattr(rl.dist, "get_rank", lambda group=None: r)


class T:
    """A stand-in tensor with a byte size (op_bytes only reads sizes)."""

    def __init__(self, nbytes, rows=None):
        self.nbytes, self.shape = nbytes, (rows or nbytes,)

    def dim(self):
        return 1


@pytest.fixture
def fake_bytes(monkeypatch):
    monkeypatch.setattr(rl, "_nb", lambda x: sum(t.nbytes for t in x) if isinstance(x, list) else x.nbytes)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_bus_bytes_follow_nccl_tests(monkeypatch, fake_bytes, n):
    _n(monkeypatch, n)
    S = 64 * MB
    f = (n - 1) / n
    assert rl.op_bytes("all_reduce", {"tensor": T(S)}).bus_bytes == pytest.approx(2 * f * S)
    assert rl.op_bytes(
        "all_gather_into_tensor", {"output_tensor": T(S), "input_tensor": T(S // n)}
    ).bus_bytes == pytest.approx(f * S)
    assert rl.op_bytes("all_gather", {"tensor_list": [T(S // n)] * n, "tensor": T(S // n)}).bus_bytes == pytest.approx(
        f * S
    )
    assert rl.op_bytes("reduce_scatter_tensor", {"output": T(S // n), "input": T(S)}).bus_bytes == pytest.approx(f * S)
    assert rl.op_bytes(
        "reduce_scatter", {"output": T(S // n), "input_list": [T(S // n)] * n}
    ).bus_bytes == pytest.approx(f * S)
    a2a = {
        "output": T(S, rows=n * 10),
        "input": T(S, rows=n * 10),
        "input_split_sizes": None,
        "output_split_sizes": None,
    }
    assert rl.op_bytes("all_to_all_single", a2a).bus_bytes == pytest.approx(f * S)
    assert rl.op_bytes(
        "all_to_all", {"input_tensor_list": [T(S // n)] * n, "output_tensor_list": [T(S // n)] * n}
    ).bus_bytes == pytest.approx(f * S)
    assert rl.op_bytes("broadcast", {"tensor": T(S), "src": 0}).bus_bytes == S
    assert rl.op_bytes("send", {"tensor": T(S)}).sent == S and rl.op_bytes("recv", {"tensor": T(S)}).recv == S


def test_uneven_all_to_all_and_rooted(monkeypatch, fake_bytes):
    _n(monkeypatch, 2, r=0)
    # rank 0 keeps 30 of its 100 rows and sends 70; it receives 50 rows (of 80) from rank 1
    a = {
        "input": T(400, rows=100),
        "output": T(320, rows=80),
        "input_split_sizes": [30, 70],
        "output_split_sizes": [30, 50],
    }
    assert rl.op_bytes("all_to_all_single", a).bus_bytes == 280  # max(sent 70, recv 50) rows x 4 B
    assert rl.op_bytes("gather", {"tensor": T(100), "dst": 0}).bus_bytes == 100  # root receives (n-1) x
    _n(monkeypatch, 4, r=2)
    assert rl.op_bytes("gather", {"tensor": T(100), "dst": 0}).bus_bytes == 100  # a leaf sends once
    _n(monkeypatch, 4, r=0)
    assert rl.op_bytes("scatter", {"tensor": T(100), "src": 0}).bus_bytes == 300


def test_roofline_is_the_slowest_resource():
    ceil = {"matmul_tflops": {"bfloat16": 800.0, "float32": 50.0}, "hbm_GBps": 4000.0, "link_GBps": 400.0}
    tr = [
        rl.Trace(flops=2 * 8192**3, hbm_bytes=3 * 128 * MB, comm_bytes=64 * MB),
        rl.Trace(flops=2 * 8192**3, hbm_bytes=3 * 128 * MB, comm_bytes=128 * MB),
    ]  # rank 1 moves more
    r = rl.roofline(tr, ceil, "bfloat16")
    assert r.compute_ms == pytest.approx(2 * 8192**3 / 800e12 * 1e3)
    assert r.memory_ms == pytest.approx(3 * 128 * MB / 4000e9 * 1e3)
    assert r.comm_ms == pytest.approx(128 * MB / 400e9 * 1e3)
    assert r.bound_ms == max(r.compute_ms, r.memory_ms, r.comm_ms) == r.compute_ms
    assert rl.roofline(tr, ceil, "float32").compute_ms == pytest.approx(r.compute_ms * 16)
    assert rl.roofline(tr, ceil, "float8_e4m3fn").compute_ms == r.compute_ms  # unknown: fastest rate
    assert rl.fraction_of_roofline(0.5, 2.0) == 0.25


def test_null_noise_bootstrap():
    a = [1.0 + 0.01 * (i % 5) for i in range(200)]
    nz = noise(a, list(a))
    assert nz["speedup"] == 1.0 and 0 <= nz["noise_speedup_p50"] <= nz["noise_speedup_p95"] < 0.02
    assert noise([2.0] * 50, [1.0] * 50)["speedup"] == 2.0


TOPO = """\t\x1b[4mGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m
GPU0\t X \tNV18\tSYS\t0-31\t0\t\tN/A
GPU1\tNV18\t X \tSYS\t0-31\t0\t\tN/A
GPU2\tSYS\tSYS\t X \t0-31\t0\t\tN/A

Legend:
  X    = Self
"""
NVLINK = (
    "GPU 0: NVIDIA H200 (UUID: GPU-x)\n\t Link 0: 26.562 GB/s\n\t Link 1: 26.562 GB/s\nGPU 1: NVIDIA "
    "H200 (UUID: y)\n\t Link 0: 26.562 GB/s\n"
)


def test_topology_parsing_and_text():
    m = topology.parse_topo_matrix(TOPO)
    assert m["GPU0"] == {"GPU0": "X", "GPU1": "NV18", "GPU2": "SYS"} and m["GPU2"]["GPU1"] == "SYS"
    gpus = topology.parse_gpus(
        "0, NVIDIA H200, 143771, 580.1\n1, NVIDIA H200, 143771, 580.1\n2, NVIDIA H200, 143771, 580.1\n"
    )
    rec = topology.build(gpus, m, topology.parse_nvlink_speeds(NVLINK))
    pair = next(p for p in rec["pairs"] if (p["a"], p["b"]) == ("GPU0", "GPU1"))
    assert pair["nvlinks"] == 18 and pair["GBps_per_direction"] == pytest.approx(478.1)
    assert rec["count"] == 3 and rec["gpu"] == "NVIDIA H200"
    text = topology.text(rec)
    assert "3x NVIDIA H200" in text and "NVLink x18" in text and "multicast" in text


# --- real gloo ranks ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pool():
    with RankPool(2, "gloo", extra_handlers=["gpu_path_jobs"]) as p:
        yield p


def test_time_solution_takes_max_over_ranks(pool):
    oc = pool.run(TimingProbe(extra_ms=4.0), timeout_s=60)
    assert oc.status == "ok", oc.reason
    s0, s1 = (r["result"] for r in oc.results)
    assert s0 == s1  # every rank gets the same cross-rank stats
    assert 8 <= s0["iters"] <= 40 and len(s0["per_iter_ms"]) == s0["iters"]
    assert min(s0["per_iter_ms"]) >= 4.0  # rank 1's sleep shows up on rank 0 too
    assert s0["p10_ms"] <= s0["median_ms"] <= s0["p90_ms"]


def test_comm_counter_counts_real_calls(pool):
    oc = pool.run(CommProbe(), timeout_s=60)
    assert oc.status == "ok", oc.reason
    for res in (x["result"] for x in oc.results):
        S = 4000
        assert res["all_reduce"] == S  # 2(n-1)/n x S with n = 2
        assert res["all_gather_into_tensor"] == res["all_gather"] == S  # (n-1)/n x 2S
        assert res["all_to_all_single"] == res["all_to_all"] == S  # (n-1)/n x 2S
        assert res["ring_p2p"] == S  # sends S and receives S at once
        assert res["send_recv"] == S
        assert res["restored"]
        assert res["flops"] == 2 * 8 * 16 * 4 and res["hbm"] == 4 * (8 * 16 + 16 * 4 + 8 * 4)


HANG = (
    "\ndef solution(x):\n    y = x.clone()\n    if dist.get_rank() == 0:\n        dist.recv(y, src=1)\n  "
    "  dist.all_reduce(y)\n    return y\n"
)


def test_gpu_pass_on_gloo_aborts_a_hung_task_and_goes_on(tmp_path):
    out = write_planted(tmp_path / "o", {"a_hang": PLANTED_HEADER + HANG, "b_good": PLANTED_HEADER + GOOD_SOLUTION})
    res = tmp_path / "res"
    cfg = GpuRunConfig(
        out=out,
        results_dir=res,
        hardware_tag="cpu-test",
        backend="gloo",
        size="smoke",
        budget_s=0.2,
        check_timeout_s=6.0,
        quiet=True,
    )
    t0 = time.monotonic()
    stats = GpuRun(cfg).run()
    # bounds that hold on a loaded 2-core machine: the run ends, and the hung task's own seconds show the
    # 6 s check timeout cut it, not the process-group timeout (60 s)
    assert time.monotonic() - t0 < 240
    assert stats["restarts"] == 1
    val = {r["task_id"]: r for r in read_jsonl(res / "validation-gloo.jsonl")}
    assert val["a_hang"]["status"] == "failed" and val["a_hang"]["reason"].startswith("timeout")
    assert val["a_hang"]["seconds"] < 6.0 + 40
    assert val["b_good"]["status"] == "passed"
    lines = {(r["task_id"], r["baseline"]): r for r in read_jsonl(res / "baselines.jsonl")}
    assert lines[("a_hang", "eager")]["status"] == "failed"
    e, n = lines[("b_good", "eager")], lines[("b_good", "null")]
    assert e["status"] == n["status"] == "ok" and e["median_ms"] > 0 and e["iters"] >= 10
    assert e["roofline"]["comm_bytes"] == 64 * 4 and e["roofline"]["bound_ms"] > 0  # 64 fp32 all-reduced
    assert n["speedup"] > 0 and n["noise_speedup_p95"] >= n["noise_speedup_p50"] >= 0
    assert len(e["run_medians_ms"]) == len(n["run_medians_ms"]) == 2  # ABBA blocks
    assert e["median_ms"] == sum(e["run_medians_ms"]) / 2
    hw = json.loads((res / "hardware.json").read_text())
    assert hw["tag"] == "cpu-test" and hw["ceilings"]["hbm_GBps"] > 0
    assert GpuRun(cfg).run()["tasks"] == 0  # resumed: nothing left to do
    acc = gpu_report.acceptance(res, backend="gloo")
    assert (acc["tasks"], acc["covered"]) == (2, 1) and len(acc["failures"]) >= 1
    assert acc["bound_violations"] == [] and "b_good" in gpu_report.task_table(res, backend="gloo")


def test_fp32_convolutions_take_the_tf32_rate():
    ceil = {
        "matmul_tflops": {"float32": 50.0, "tfloat32": 400.0, "bfloat16": 800.0},
        "hbm_GBps": 4000.0,
        "link_GBps": 400.0,
    }
    tr = rl.Trace(flops=3e12, hbm_bytes=0, comm_bytes=0, conv_flops=2e12, tf32={"matmul": False, "conv": True})
    assert rl.roofline([tr], ceil, "float32").compute_ms == pytest.approx((1e12 / 50e12 + 2e12 / 400e12) * 1e3)
    assert rl.roofline([tr], ceil, "bfloat16").compute_ms == pytest.approx(3e12 / 800e12 * 1e3)


def test_causal_attention_counts_only_kept_pairs():
    """The roofline's FLOPs for causal SDPA are the kept (query, key) pairs' share of the full count,
    so the bound stays below kernels that skip masked blocks (it was above the H200's fp32 tp_attention)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from mgbench.validation.gpu.roofline import causal_pairs, trace_call

    q = torch.randn(2, 4, 64, 16)
    with sdpa_kernel(SDPBackend.MATH):
        _, full = trace_call(lambda a, b, c: F.scaled_dot_product_attention(a, b, c), (q, q, q))
        _, causal = trace_call(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True), (q, q, q))
    assert full.flops > 0 and causal.flops == pytest.approx(full.flops * causal_pairs(64, 64) / 64**2)
    assert causal_pairs(3, 5) == 1 + 2 + 3 and causal_pairs(5, 3) == 6 + 2 * 3


def test_timing_reuses_a_warm_calibration():
    """ABBA blocks after the first skip warm-up: same calls per region and lead, regions sized from
    the first block's region time, at least min_iters."""
    from mgbench.validation.timing import time_solution

    x = torch.randn(256)
    first = time_solution(lambda a: a * 2, lambda i: (x.clone(),), device="cpu", budget_s=0.05, min_iters=3).to_dict()
    again = time_solution(
        lambda a: a * 2, lambda i: (x.clone(),), device="cpu", budget_s=0.05, min_iters=3, warm_from=first
    )
    assert first["warmup_iters"] > 0 and first["region_s"] > 0
    assert again.warmup_iters == 0 and again.calls_per_iter == first["calls_per_iter"] and again.iters >= 3
    assert again.iters == max(3, min(1000, int(0.05 / first["region_s"])))


def test_calls_per_region_stays_within_the_hosts_lead():
    """k fills about 2 ms of device time, but never more calls than the host can launch in a third
    of the longest lead (else the device waits on the host and the events time the host)."""
    from mgbench.validation.timing import LEAD_FACTOR, LEAD_MAX_US, calls_per_region

    assert calls_per_region(0.02) == 100 and calls_per_region(5.0) == 1 and calls_per_region(1e-5) == 200
    k = calls_per_region(0.02, host_per_call_ms=0.06)
    assert k * 0.06 * LEAD_FACTOR <= LEAD_MAX_US / 1e3 < (k + 1) * 0.06 * LEAD_FACTOR
    assert calls_per_region(0.02, host_per_call_ms=50.0) == 1
