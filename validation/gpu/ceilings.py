"""Hardware ceilings measured on the ranks at the start of a GPU run (rank-side functions).

Every rank measures its own GPU at the same time (as tasks run): dense matmul rate per dtype
(best over a few large shapes), HBM copy bandwidth (bytes read + written), and the peer link
bandwidth per direction to the next rank: the best of copy-engine copies (cudaMemcpy between
devices) and SM-driven copies (an elementwise kernel reading or writing a peer's
symmetric-memory buffer), with all ranks sending at once and with one sender alone. NCCL's
large-message bus bandwidth (nccl-tests conventions) is recorded beside it for reference.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from mgbench import distops

MATMUL_SHAPES = ((8192, 8192, 8192), (16384, 8192, 8192), (8192, 16384, 4096))
MATMUL_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
COPY_BYTES = 1 << 30
LINK_BYTES = 256 << 20
NCCL_BYTES = 256 << 20


def time_ms(fn: Callable[[], Any], reps: int = 10, warmup: int = 3) -> float:
    """Median of `reps` event-timed calls after `warmup` calls (CUDA; perf_counter without CUDA)."""
    for _ in range(warmup):
        fn()
    if not torch.cuda.is_available():
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ts)
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    return statistics.median(ts)


def matmul_tflops(device: torch.device) -> dict[str, float]:
    """Best dense matmul rate per dtype over MATMUL_SHAPES, on random data."""
    g = torch.Generator(device=device).manual_seed(0)
    out: dict[str, float] = {}
    for dt in MATMUL_DTYPES:
        best = 0.0
        for m, k, n in MATMUL_SHAPES:
            a = torch.randn(m, k, device=device, dtype=dt, generator=g)
            b = torch.randn(k, n, device=device, dtype=dt, generator=g)
            reps = 4 if dt == torch.float32 else 10
            ms = time_ms(lambda: a @ b, reps=reps, warmup=2)
            best = max(best, 2.0 * m * k * n / (ms * 1e-3) / 1e12)
            del a, b
        out[str(dt).removeprefix("torch.")] = round(best, 2)
    prev = torch.backends.cuda.matmul.allow_tf32
    try:  # float32 inputs on the TF32 tensor cores (cuDNN's default for convs)
        torch.backends.cuda.matmul.allow_tf32 = True
        a = torch.randn(8192, 8192, device=device, generator=g)
        ms = time_ms(lambda: a @ a, reps=5, warmup=2)
        out["tfloat32"] = round(2.0 * 8192**3 / (ms * 1e-3) / 1e12, 2)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    return out


def hbm_GBps(device: torch.device) -> float:
    """Device-to-device copy bandwidth, counting bytes read plus bytes written."""
    src = torch.randint(0, 255, (COPY_BYTES,), dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src))
    return round(2 * COPY_BYTES / (ms * 1e-3) / 1e9, 1)


def _rate(nbytes: int, ms: float) -> float:
    return round(nbytes / (ms * 1e-3) / 1e9, 1) if ms > 0 else 0.0


def _both_modes(rank: int, fn_all: Callable[[], Any], fn_one: Callable[[], Any]) -> tuple[float, float]:
    """(per-direction GB/s with all ranks sending, GB/s with rank 0 alone sending); collective."""
    dist.barrier()
    t_all = time_ms(fn_all, reps=10)
    dist.barrier()
    t_one = time_ms(fn_one, reps=10) if rank == 0 else 0.0
    dist.barrier()
    return _rate(LINK_BYTES, t_all), _rate(LINK_BYTES, t_one)


def link_GBps(rank: int, world: int, device: torch.device) -> dict[str, float]:
    """Peer bandwidth to the next rank, per direction, by copy engine and by SM kernels."""
    res: dict[str, float] = {}
    if world < 2:
        return res
    peer_dev = torch.device("cuda", ((device.index or 0) + 1) % torch.cuda.device_count())
    n = LINK_BYTES // 4
    src = torch.randn(n, device=device)
    try:  # copy engine: a cudaMemcpy from this GPU into a buffer on the next GPU
        dst = torch.empty(n, device=peer_dev)
        res["ce_all"], res["ce_one"] = _both_modes(rank, lambda: dst.copy_(src), lambda: dst.copy_(src))
        del dst
    except Exception as e:  # noqa: BLE001 - a ceiling that cannot be measured is recorded as such
        res["ce_error"] = f"{type(e).__name__}: {e}"[:200]
    try:  # SM-driven: kernels on this GPU writing to / reading from the next rank's buffer
        import torch.distributed._symmetric_memory as symm_mem

        buf = symm_mem.empty(n, dtype=torch.float32, device=device)
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
        peer = hdl.get_buffer((rank + 1) % world, (n,), torch.float32)
        local = torch.empty(n, device=device)
        res["sm_write_all"], res["sm_write_one"] = _both_modes(
            rank, lambda: torch.neg(src, out=peer), lambda: torch.neg(src, out=peer)
        )
        res["sm_read_all"], res["sm_read_one"] = _both_modes(
            rank, lambda: torch.neg(peer, out=local), lambda: torch.neg(peer, out=local)
        )
        dist.barrier()
        del peer, hdl, buf
    except Exception as e:  # noqa: BLE001
        res["sm_error"] = f"{type(e).__name__}: {e}"[:200]
    return res


def nccl_busbw(world: int, device: torch.device) -> dict[str, float]:
    """NCCL bus bandwidth (GB/s, nccl-tests factors) at NCCL_BYTES per rank, bf16."""
    if world < 2:
        return {}
    x = torch.randn(NCCL_BYTES // 2, device=device, dtype=torch.bfloat16)
    big = torch.empty(x.numel() * world, device=device, dtype=x.dtype)
    ops = distops.BY_NAME
    out = {}
    for op, fn, nbytes in (  # keyed by the realization each op measures
        (ops["all_reduce"], lambda: dist.all_reduce(x), NCCL_BYTES),
        (ops["all_gather_into_tensor"], lambda: dist.all_gather_into_tensor(big, x), NCCL_BYTES * world),
        (ops["reduce_scatter_tensor"], lambda: dist.reduce_scatter_tensor(x[: x.numel() // world], x), NCCL_BYTES),
        (ops["all_to_all_single"], lambda: dist.all_to_all_single(big[: x.numel()], x), NCCL_BYTES),
    ):
        dist.barrier()
        ms = time_ms(fn, reps=10, warmup=3)
        out[op.realization] = round(nbytes / (ms * 1e-3) / 1e9 * op.bus_factor(world), 1)
    return out


def measure_cpu(rank: int, world: int) -> dict[str, Any]:
    """Rough host ceilings for CPU (gloo) runs: small matmul rate and memcpy bandwidth only."""
    a = torch.randn(512, 512)
    src = torch.empty(16 << 20, dtype=torch.uint8)
    dst = torch.empty_like(src)
    rate = 2 * 512**3 / (time_ms(lambda: a @ a, reps=5, warmup=1) * 1e-3) / 1e12
    return {
        "matmul_tflops": {d: round(rate, 4) for d in ("bfloat16", "float16", "float32", "tfloat32")},
        "hbm_GBps": round(2 * src.numel() / (time_ms(lambda: dst.copy_(src), reps=5, warmup=1) * 1e-3) / 1e9, 2),
        "link_detail_GBps": {},
        "nccl_busbw_GBps": {},
        "seconds": 0.0,
    }


def measure(rank: int, world: int, device: torch.device) -> dict[str, Any]:
    """All ceilings of this rank's GPU (units in the keys: TFLOP/s and GB/s)."""
    if device.type != "cuda":
        return measure_cpu(rank, world)
    t0 = time.perf_counter()
    out: dict[str, Any] = {"matmul_tflops": matmul_tflops(device), "hbm_GBps": hbm_GBps(device)}
    torch.cuda.empty_cache()
    out["link_detail_GBps"] = link_GBps(rank, world, device)
    out["nccl_busbw_GBps"] = nccl_busbw(world, device)
    out["seconds"] = round(time.perf_counter() - t0, 2)
    torch.cuda.empty_cache()
    return out


def combine(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """Machine ceilings from all ranks: the best rate seen anywhere (a roofline must stay a lower bound)."""
    dtypes = per_rank[0]["matmul_tflops"]
    detail: dict[str, float] = {}
    for r in per_rank:
        for k, v in r["link_detail_GBps"].items():
            if isinstance(v, (int, float)):
                detail[k] = max(detail.get(k, 0.0), v)
    errors = sorted({f"{k}: {v}" for r in per_rank for k, v in r["link_detail_GBps"].items() if isinstance(v, str)})
    return {
        "matmul_tflops": {d: max(r["matmul_tflops"][d] for r in per_rank) for d in dtypes},
        "hbm_GBps": max(r["hbm_GBps"] for r in per_rank),
        "link_GBps": max(detail.values()) if detail else None,
        "link_detail_GBps": detail,
        "link_errors": errors,
        "nccl_busbw_GBps": per_rank[0]["nccl_busbw_GBps"],
        "units": {
            "matmul_tflops": "TFLOP/s (dense, random data)",
            "hbm_GBps": "GB/s (read + write)",
            "link_GBps": "GB/s per direction to one peer (best of copy engine / SM peer copies)",
            "nccl_busbw_GBps": f"GB/s bus bandwidth at {NCCL_BYTES >> 20} MiB per rank, bf16",
        },
        "per_rank_seconds": [r["seconds"] for r in per_rank],
    }
