"""Collective timing of one callable on every rank: device events, rotated input copies, warm-up
until stable, a barrier before each timed call, per-iteration max over ranks, a time budget.

All ranks of the default process group call `time_solution` with the same arguments; every rank
gets the same cross-rank statistics back. Without a process group it times the local process
alone. On CPU devices it uses time.perf_counter instead of CUDA events. docs/timing.md explains
the method.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.distributed as dist

L2_FALLBACK_BYTES = 50 * 2**20  # H200: 50 MB (PyTorch reports 60 MB on some drivers)
ROTATION_L2_MULTIPLE = 2  # rotated input sets together span at least 2x L2
MAX_COPIES = 256
COPY_MEMORY_CAP = 8 * 2**30  # never hold more than this in rotated copies
WARMUP_BATCH = 5
WARMUP_STABLE_REL = 0.05  # warm-up ends when two batch medians agree within 5%
WARMUP_FRACTION = 0.3  # at most this share of the budget goes to warm-up
LEAD_MIN_US, LEAD_MAX_US = 50.0, 10000.0  # device-side lead before each timed region (see _Timer)
LEAD_FACTOR = 3.0  # lead = this x the host's median launch time of a region
REGION_MS = 2.0  # calls shorter than this are timed k at a time, back to back
MAX_CALLS_PER_REGION = 200
TIMING_VERSION = 3  # bumped when the method changes; results of older versions are redone


@dataclass
class TimingStats:
    """Statistics of the per-iteration times (each the max over ranks), in milliseconds."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    cv: float
    iters: int
    per_iter_ms: list[float] = field(default_factory=list)
    warmup_iters: int = 0
    n_copies: int = 1
    l2_flush: bool = False
    lead_us: float = 0.0
    calls_per_iter: int = 1  # back-to-back calls per timed region (per_iter_ms is per call)
    region_s: float = 0.0  # wall time of one timed region (lead, barrier and calls)

    def to_dict(self, with_samples: bool = False) -> dict[str, Any]:
        d = asdict(self)
        if not with_samples:
            d.pop("per_iter_ms")
        return d


def quantile(xs: list[float], q: float) -> float:
    """Linear-interpolated quantile of a non-empty list (q in [0, 1])."""
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(per_iter_ms: list[float], **extra: Any) -> TimingStats:
    """TimingStats of a list of per-iteration times."""
    mean = statistics.fmean(per_iter_ms)
    cv = statistics.pstdev(per_iter_ms) / mean if mean > 0 and len(per_iter_ms) > 1 else 0.0
    return TimingStats(
        statistics.median(per_iter_ms),
        quantile(per_iter_ms, 0.1),
        quantile(per_iter_ms, 0.9),
        cv,
        len(per_iter_ms),
        list(per_iter_ms),
        **extra,
    )


def tensor_bytes(obj: Any) -> int:
    """Bytes of all tensors in a nested tuple/list/dict."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, (tuple, list)):
        return sum(tensor_bytes(v) for v in obj)
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    return 0


def l2_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or L2_FALLBACK_BYTES)
    return L2_FALLBACK_BYTES


def copies_needed(set_bytes: int, l2: int, cap_bytes: int = COPY_MEMORY_CAP) -> tuple[int, bool]:
    """(number of rotated input sets, whether an L2 flush is still needed between iterations)."""
    want = max(2, math.ceil(ROTATION_L2_MULTIPLE * l2 / max(set_bytes, 1)))
    n = max(2, min(want, MAX_COPIES, cap_bytes // max(set_bytes, 1)))
    return n, n * set_bytes < ROTATION_L2_MULTIPLE * l2


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def _agree_max(values: list[float], device: torch.device) -> list[float]:
    """Element-wise max over ranks (identity without a process group)."""
    if not _distributed():
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _barrier(device: torch.device) -> None:
    """All ranks leave together with their device idle (NCCL's barrier blocks the host)."""
    _sync(device)
    if _distributed():
        dist.barrier()
    _sync(device)


_CYCLES_PER_US: dict[int, float] = {}


def cycles_per_us(device: torch.device) -> float:
    """Calibrate torch.cuda._sleep (clock cycles) against device events, once per device."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _CYCLES_PER_US:
        torch.cuda._sleep(200_000)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.cuda._sleep(2_000_000)
        e.record()
        e.synchronize()
        _CYCLES_PER_US[idx] = 2_000_000 / max(s.elapsed_time(e) * 1e3, 1.0)
    return _CYCLES_PER_US[idx]


class _Timer:
    """Times regions of k back-to-back calls: CUDA events on a GPU, perf_counter on the host.

    On a GPU each region starts with a device-side spin (`lead_us`) and, under a process group,
    a one-element all-reduce that lines the devices of all ranks up to within microseconds; then
    the start event, the k calls and the end event. The spin lets the host queue the region's
    launches before the device reaches the start event, so the events measure device time; host
    launch overhead counts only where it exceeds the lead (or where a call synchronizes with the
    host).
    """

    def __init__(self, device: torch.device, n: int, lead_us: float = 0.0):
        self.cuda = device.type == "cuda"
        self.device = device
        if self.cuda:
            self.events = [
                (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)
            ]
            self.lead_cycles = int(lead_us * cycles_per_us(device)) if lead_us > 0 else 0
            self.flag = torch.zeros(1, device=device) if _distributed() else None
        self.host: list[float] = [0.0] * n

    def call(self, i: int, fn: Callable, arg_sets: list[tuple]) -> None:
        t0 = time.perf_counter()
        if self.cuda:
            start, end = self.events[i]
            if self.lead_cycles:
                torch.cuda._sleep(self.lead_cycles)
            if self.flag is not None:
                dist.all_reduce(self.flag)  # device-side alignment of the ranks' start events
            start.record()
            for args in arg_sets:
                fn(*args)
            end.record()
            self.host[i] = (time.perf_counter() - t0) * 1e3
        else:
            for args in arg_sets:
                fn(*args)
            self.host[i] = (time.perf_counter() - t0) * 1e3

    def results_ms(self) -> list[float]:
        if self.cuda:
            torch.cuda.synchronize(self.device)
            return [s.elapsed_time(e) for s, e in self.events]
        return list(self.host)


AfterRegion = Callable[[list[int], list[tuple]], None]


def _run_iters(
    fn: Callable,
    sets: list[tuple],
    n: int,
    start: int,
    device: torch.device,
    flush: torch.Tensor | None,
    lead_us: float = 0.0,
    k: int = 1,
    after_region: AfterRegion | None = None,
) -> tuple[list[float], list[float]]:
    """n timed regions of k calls, each after an (optional) L2 flush and a barrier.

    `after_region(set indices, sets)` runs after each region's end event, before the next
    region's barrier (outside the timed region). Returns (device ms per call, host ms per region)."""
    timer = _Timer(device, n, lead_us)
    for i in range(n):
        if flush is not None:
            flush.zero_()
        _barrier(device)
        idx = [(start + i * k + j) % len(sets) for j in range(k)]
        timer.call(i, fn, [sets[x] for x in idx])
        if after_region is not None:
            after_region(idx, sets)
    return [t / k for t in timer.results_ms()], timer.host


def lead_for(host_ms: list[float]) -> float:
    """Device-side lead (us) covering the host launch time of a region, within bounds."""
    return min(LEAD_MAX_US, max(LEAD_MIN_US, LEAD_FACTOR * 1e3 * statistics.median(host_ms)))


def calls_per_region(per_call_ms: float, host_per_call_ms: float = 0.0) -> int:
    """Back-to-back calls per timed region so that a region lasts about REGION_MS, but no more
    than the host can launch within the longest lead with LEAD_FACTOR to spare: where the lead
    capped below the host's launch time, the regions partly timed the host."""
    k = min(MAX_CALLS_PER_REGION, max(1, math.ceil(REGION_MS / max(per_call_ms, 1e-6))))
    if host_per_call_ms > 0:
        k = min(k, max(1, math.floor(LEAD_MAX_US / 1e3 / (LEAD_FACTOR * host_per_call_ms))))
    return int(k)


def time_solution(
    fn: Callable,
    make_args: Callable[[int], tuple],
    *,
    device: torch.device | str,
    budget_s: float = 1.0,
    n_copies: int | None = None,
    min_iters: int = 10,
    max_iters: int = 1000,
    warm_from: dict[str, Any] | None = None,
    after_region: AfterRegion | None = None,
    distinct_in_region: bool = False,
) -> TimingStats:
    """Time `fn(*make_args(i))` collectively; returns the cross-rank-max statistics on every rank.

    make_args(i) gives the i-th rotated input set (each a distinct copy); n_copies None sizes the
    rotation past 2x L2. `budget_s` bounds warm-up plus measurement (min_iters always run).
    `warm_from` (the stats dict of a timing of the same fn just before) skips the warm-up and
    reuses its calls per region, lead and region time.
    Scoring hooks (the baselines use neither, so their method is unchanged): `after_region` is
    called after each region (and after the first call) with the set indices it used, outside the
    timed region; `distinct_in_region` adds input sets after warm-up, up to the memory cap, so that
    no set is used twice within one timed region.
    """
    device = torch.device(device)
    t_begin = time.perf_counter()
    first = make_args(0)
    set_bytes = tensor_bytes(first)
    if n_copies is None:
        n_copies, need_flush = copies_needed(set_bytes, l2_bytes(device)) if device.type == "cuda" else (2, False)
    else:
        need_flush = device.type == "cuda" and n_copies * set_bytes < ROTATION_L2_MULTIPLE * l2_bytes(device)
    sets = [first] + [make_args(i) for i in range(1, n_copies)]
    flush = (
        torch.empty(ROTATION_L2_MULTIPLE * l2_bytes(device) // 4, dtype=torch.float32, device=device)
        if need_flush
        else None
    )
    if warm_from is not None:  # same on every rank, so every rank times the same number of regions
        k, lead, region_s = int(warm_from["calls_per_iter"]), float(warm_from["lead_us"]), float(warm_from["region_s"])
        start, warmup_calls, elapsed = 0, 0, 0.0
    else:
        start, k, lead, region_s, elapsed = _warm_up(fn, sets, device, flush, budget_s, t_begin, after_region)
        warmup_calls = start + 1  # the first call and the warm-up regions' calls
    if distinct_in_region:
        want = min(k, COPY_MEMORY_CAP // max(set_bytes, 1))
        sets += [make_args(i) for i in range(len(sets), want)]
        n_copies = len(sets)
    iters = int(max(min_iters, min(max_iters, (budget_s - elapsed) / max(region_s, 1e-9))))
    local, _ = _run_iters(fn, sets, iters, start, device, flush, lead, k, after_region)
    per_iter = _agree_max(local, device)
    return summarize(
        per_iter,
        warmup_iters=warmup_calls,
        n_copies=n_copies,
        l2_flush=need_flush,
        lead_us=round(lead, 1) if device.type == "cuda" else 0.0,
        calls_per_iter=k,
        region_s=region_s,
    )


def _warm_up(
    fn: Callable,
    sets: list[tuple],
    device: torch.device,
    flush: torch.Tensor | None,
    budget_s: float,
    t_begin: float,
    after_region: AfterRegion | None = None,
) -> tuple[int, int, float, float, float]:
    """First call, then batches of regions until the time is stable or the warm-up share of the
    budget is spent; returns (warm-up calls, calls per region, lead us, region s, elapsed s),
    all agreed across ranks."""
    fn(*sets[0])  # first call: lazy init, autotuning, handles
    _sync(device)
    if after_region is not None:
        after_region([0], sets)
    warm, done, prev, lead, k = 0, False, None, LEAD_MIN_US, 1
    while not done:
        t0 = time.perf_counter()
        dev_ms, host_ms = _run_iters(fn, sets, WARMUP_BATCH, warm, device, flush, lead, k, after_region)
        med = statistics.median(dev_ms)
        warm += WARMUP_BATCH * k
        batch_s = time.perf_counter() - t0
        stable = prev is not None and abs(med - prev) <= WARMUP_STABLE_REL * prev
        elapsed = time.perf_counter() - t_begin
        not_stable, elapsed, region_s, lead, per_call, host_call = _agree_max(
            [
                0.0 if stable else 1.0,
                elapsed,
                batch_s / WARMUP_BATCH,
                lead_for(host_ms),
                med,
                statistics.median(host_ms) / k if device.type == "cuda" else 0.0,
            ],
            device,
        )
        done = not_stable == 0.0 or elapsed + region_s * WARMUP_BATCH > WARMUP_FRACTION * budget_s
        new_k = calls_per_region(per_call, host_call)
        if new_k != k:  # regions resized: host lead and region time change with k
            lead = min(LEAD_MAX_US, lead * new_k / k)
            region_s *= new_k / k
            k, done = new_k, False if elapsed < WARMUP_FRACTION * budget_s else done
        prev = med
    return warm, k, lead, region_s, elapsed
