"""The GPU pass of `mgbench validate --timing`: full-size correctness, timing of the baselines,
the null candidate and the roofline, written under results/<hardware-tag>/, resumably.

Files: hardware.json (topology + ceilings), validation-<backend>.jsonl (ValidationResult lines),
baselines.jsonl (one line per task x world size x baseline; resumed by
(task_id, content_hash, world_size, baseline)).
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from mgbench.report import Progress
from mgbench.store import append_jsonl, latest_by, load_manifest, validation_key
from mgbench.taskfilter import TaskFilter
from mgbench.validation import topology
from mgbench.validation.gpu import baselines as bl
from mgbench.validation.gpu import ceilings
from mgbench.validation.gpu.roofline import Trace, fraction_of_roofline, roofline
from mgbench.validation.jobs import BaselineJob, CeilingsJob, TimeJob
from mgbench.validation.pool import JobOutcome, RankPool, has_cpu_group, needs_cpu_group, with_cpu_group_retry
from mgbench.validation.run import ValidationResult, check_task
from mgbench.validation.timing import TIMING_VERSION, quantile

TIMED = ("eager", "null")
RANK_ENV = {"TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING": "false"}
CPU_GROUP, SKIPPED = "needs a CPU (gloo) group", "skipped"


@dataclass
class GpuRunConfig:
    out: Path  # folder with manifest.jsonl
    results_dir: Path  # results/<hardware-tag>/
    hardware_tag: str
    world_sizes: list[int] = field(default_factory=lambda: [2])
    backend: str = "nccl"
    size: str = "full"
    seed: int = 0
    budget_s: float = 0.3  # per timing (eager, null, each baseline)
    check_timeout_s: float = 90.0
    baselines: tuple[str, ...] = TIMED  # plus "compile" and/or "vendor"
    task_ids: list[str] | None = None
    levels: list[int] | None = None
    families: list[str] | None = None
    dtypes: list[str] | None = None  # long names (bfloat16, float32, ...) or any spelling mgbench.dtypes knows
    shard: tuple[int, int] = (0, 1)  # (index, count)
    max_seconds: float | None = None  # stop starting new tasks after this
    retry_failed: bool = False
    remeasure: bool = False
    keep_old_timings: bool = False  # do not redo lines of an older TIMING_VERSION
    quiet: bool = False


def baseline_key(rec: dict[str, Any]) -> tuple:
    return (rec["task_id"], rec["content_hash"], rec["world_size"], rec["baseline"])


def select(tasks: list[dict[str, Any]], cfg: GpuRunConfig) -> list[dict[str, Any]]:
    """Tasks after the id / level / family / dtype filters and the shard."""
    out = TaskFilter.of(cfg.task_ids, cfg.levels, cfg.families, cfg.dtypes).select(tasks)
    i, n = cfg.shard
    return [t for k, t in enumerate(out) if k % n == i]


def noise(a_ms: list[float], b_ms: list[float], resamples: int = 200, seed: int = 0) -> dict[str, float]:
    """Null-candidate speedup median(A)/median(B) and bootstrap p50/p95 of |speedup - 1|."""
    rng = random.Random(seed)
    point = _median(a_ms) / _median(b_ms)
    dev = [
        abs(_median(rng.choices(a_ms, k=len(a_ms))) / _median(rng.choices(b_ms, k=len(b_ms))) - 1)
        for _ in range(resamples)
    ]
    return {"speedup": point, "noise_speedup_p50": quantile(dev, 0.5), "noise_speedup_p95": quantile(dev, 0.95)}


def _median(xs: list[float]) -> float:
    return quantile(xs, 0.5)


class GpuRun:
    """One GPU pass over a selection of tasks; see GpuRunConfig."""

    def __init__(self, cfg: GpuRunConfig):
        self.cfg = cfg
        self.dir = Path(cfg.results_dir)
        self.hw_path = self.dir / "hardware.json"
        self.val_path = self.dir / f"validation-{cfg.backend}.jsonl"
        self.bl_path = self.dir / "baselines.jsonl"
        self.t0 = time.monotonic()
        self.hw: dict[str, Any] = {}
        self.stats = {"tasks": 0, "skipped": 0, "check_s": 0.0, "time_s": 0.0, "extra_s": 0.0}

    # --- hardware record -------------------------------------------------------------------
    def hardware(self, pool: RankPool) -> dict[str, Any]:
        """Load hardware.json, or detect topology and measure ceilings on the pool and write it."""
        if self.hw_path.exists() and not self.cfg.remeasure:
            self.hw = json.loads(self.hw_path.read_text())
            if self.hw.get("ceilings"):
                return self.hw
        oc = pool.run(CeilingsJob(), timeout_s=300)
        if oc.status != "ok":
            raise RuntimeError(f"measuring the ceilings failed: {oc.reason}")
        topo = topology.detect() if self.cfg.backend == "nccl" else {"count": 0}
        nccl = torch.cuda.nccl.version() if self.cfg.backend == "nccl" else None
        self.hw = {
            "tag": self.cfg.hardware_tag,
            "gpu": topo.get("gpu"),
            "count": topo.get("count"),
            "world_size_measured": pool.world_size,
            "topology": topo,
            "topology_text": topology.text(topo),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl,
            "env": dict(sorted(pool.env.items())),
            "ceilings": ceilings.combine([r["result"] for r in oc.results]),
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.hw_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.hw, indent=1, sort_keys=True) + "\n")
        tmp.replace(self.hw_path)
        return self.hw

    # --- records ---------------------------------------------------------------------------
    def _line(
        self, t: dict[str, Any], ws: int, baseline: str, status: str, reason: str = "", **extra: Any
    ) -> dict[str, Any]:
        rec = {
            "task_id": t["task_id"],
            "content_hash": t["content_hash"],
            "hardware": self.cfg.hardware_tag,
            "family": t.get("family"),
            "level": t.get("level"),
            "dtype": t.get("dtype"),
            "gpu": self.hw.get("gpu"),
            "gpu_count": self.hw.get("count"),
            "world_size": ws,
            "baseline": baseline,
            "status": status,
            "reason": reason,
            "median_ms": None,
            "p10_ms": None,
            "p90_ms": None,
            "cv": None,
            "iters": None,
            "noise_speedup_p50": None,
            "noise_speedup_p95": None,
            "roofline": None,
            "fraction_of_roofline": None,
            "peak_mem_bytes": None,
            "measured_at": round(time.time(), 3),
            "timing_version": TIMING_VERSION,
        }
        rec.update(extra)
        append_jsonl(self.bl_path, rec)
        return rec

    @staticmethod
    def _timing_fields(st: dict[str, Any]) -> dict[str, Any]:
        return {k: st[k] for k in ("median_ms", "p10_ms", "p90_ms", "cv", "iters", "run_medians_ms") if k in st}

    @staticmethod
    def _roof(rf: dict[str, float] | None, median: float | None) -> dict[str, Any]:
        if not rf:
            return {}
        return {"roofline": rf, "fraction_of_roofline": fraction_of_roofline(rf["bound_ms"], median)}

    # --- per task ----------------------------------------------------------------------------
    def _job(self, t: dict[str, Any], record: type[TimeJob | BaselineJob], **kw: Any) -> TimeJob | BaselineJob:
        return record(
            path=t["_path"],
            content_hash=t["content_hash"],
            size=self.cfg.size,
            seed=self.cfg.seed,
            budget_s=self.cfg.budget_s,
            **kw,
        )

    def _timeout(self, n_timings: int) -> float:
        return self.cfg.check_timeout_s + n_timings * (self.cfg.budget_s * 3 + 10)

    def time_task(self, pool: RankPool, t: dict[str, Any], ws: int) -> str:
        oc = pool.run(self._job(t, TimeJob), self._timeout(2))
        self.stats["time_s"] += oc.seconds
        if oc.status != "ok" and self._wants_cpu_group(pool, t, oc.reason):
            return CPU_GROUP  # checked earlier on a retry pool: time it there too
        if oc.status != "ok":
            for b in TIMED:
                self._line(t, ws, b, "failed", f"{oc.status}: {oc.reason}", seconds=round(oc.seconds, 3))
            return "timing failed"
        res = [r["result"] for r in oc.results]
        e, n = res[0]["eager"], res[0]["null"]
        peak = max(r["peak_mem_bytes"] for r in res)
        traces = [Trace(**r["trace"]) for r in res]
        comm = {
            "comm_by_op": traces[0].comm_by_op,
            "conv_flops": max(t.conv_flops for t in traces),
            "tf32": traces[0].tf32,
        }
        rf = roofline(traces, self.hw["ceilings"], t.get("dtype", "float32")).to_dict()
        self._roofs[(t["task_id"], t["content_hash"], ws)] = rf
        roof = self._roof(rf, e["median_ms"])
        self._line(
            t,
            ws,
            "eager",
            "ok",
            **self._timing_fields(e),
            **roof,
            peak_mem_bytes=peak,
            seconds=round(oc.seconds, 3),
            **{k: e[k] for k in ("warmup_iters", "n_copies", "lead_us", "calls_per_iter")},
            **comm,
        )
        nz = {**noise(e["per_iter_ms"], n["per_iter_ms"]), "speedup": e["median_ms"] / n["median_ms"]}
        self._line(
            t, ws, "null", "ok", **self._timing_fields(n), **nz, **self._roof(rf, n["median_ms"]), peak_mem_bytes=peak
        )
        return f"eager {e['median_ms']:.3f} ms, bound {roof['roofline']['bound_ms']:.3f} ms, null {nz['speedup']:.3f}"

    def extra_baseline(
        self, pool: RankPool, t: dict[str, Any], ws: int, name: str, tolerance: dict[str, float] | None
    ) -> str:
        task = {"family": t.get("family"), "params": t.get("params", {})}
        oc: JobOutcome = pool.run(
            self._job(t, BaselineJob, baseline=name, task=task, tolerance=tolerance),
            self._timeout(1) + (240 if name == "compile" else 30),
        )
        self.stats["extra_s"] += oc.seconds
        if oc.status != "ok":
            self._line(t, ws, name, "failed", f"{oc.status}: {oc.reason}", seconds=round(oc.seconds, 3))
            return f"{name} failed"
        r0 = oc.results[0]["result"]
        if r0["status"] != "ok":
            self._line(t, ws, name, r0["status"], r0["reason"], seconds=round(oc.seconds, 3))
            return f"{name} {r0['status']}"
        st = r0["stats"]
        roof = self._roof(self._roofs.get((t["task_id"], t["content_hash"], ws)), st["median_ms"])
        self._line(
            t,
            ws,
            name,
            "ok",
            **self._timing_fields(st),
            **roof,
            peak_mem_bytes=max(r["result"]["peak_mem_bytes"] for r in oc.results),
            setup_s=r0["setup_s"],
            seconds=round(oc.seconds, 3),
        )
        return f"{name} {st['median_ms']:.3f} ms"

    def wanted(self, t: dict[str, Any]) -> list[str]:
        names = [b for b in self.cfg.baselines if b in TIMED or b == "compile"]
        if "vendor" in self.cfg.baselines:
            names += bl.vendor_names(t) or ["symm_mem"]
        return names

    def _wants_cpu_group(self, pool: RankPool, t: dict[str, Any], reason: str) -> bool:
        """A level-4 failure from CPU tensors on an NCCL-only group, on a pool without gloo for them."""
        return t.get("level") == 4 and needs_cpu_group(self.cfg.backend, reason) and not has_cpu_group(pool)

    def run_task(self, pool: RankPool, t: dict[str, Any], ws: int, vdone: dict, bdone: dict) -> str:
        """Check, time and baseline one task; CPU_GROUP (nothing written) when a level-4 task needs a pool
        that gives its CPU tensors gloo and this pool does not."""
        key = (t["task_id"], t["content_hash"], ws)
        v = vdone.get((*key[:2], ws, self.cfg.size, self.cfg.backend))
        if v is None or (self.cfg.retry_failed and v["status"] != "passed"):
            res: ValidationResult = check_task(
                pool, t, self.cfg.size, self.cfg.hardware_tag, self.cfg.seed, self.cfg.check_timeout_s
            )
            self.stats["check_s"] += res.seconds
            if self._wants_cpu_group(pool, t, res.reason):
                return CPU_GROUP
            append_jsonl(self.val_path, asdict(res))
            v = asdict(res)
        todo = [
            b
            for b in self.wanted(t)
            if (b_rec := bdone.get((*key, b))) is None or (self.cfg.retry_failed and b_rec["status"] == "failed")
        ]
        if v["status"] != "passed":
            for b in todo:
                self._line(t, ws, b, "failed", f"validation failed: {v['reason']}")
            return f"FAILED validation ({v['reason']})"
        msg = []
        if any(b in TIMED for b in todo):
            msg.append(self.time_task(pool, t, ws))
            if msg[-1] == CPU_GROUP:
                return CPU_GROUP
        for b in todo:
            if b in TIMED:
                continue
            if b == "symm_mem":
                self._line(
                    t, ws, b, bl.NOT_APPLICABLE, f"no PyTorch symmetric-memory op for family {t.get('family')!r}"
                )
                continue
            msg.append(self.extra_baseline(pool, t, ws, b, v.get("tolerance")))
        return "; ".join(msg) or "done"

    def run(self) -> dict[str, Any]:
        cfg = self.cfg
        tasks = select(load_manifest(cfg.out), cfg)
        vdone = latest_by(self.val_path, validation_key)
        bdone = {
            k: r
            for k, r in latest_by(self.bl_path, baseline_key).items()  # older timings are redone
            if r["status"] != "ok" or r.get("timing_version") == TIMING_VERSION or cfg.keep_old_timings
        }
        self._roofs: dict[tuple, dict[str, float]] = {
            k[:3]: r["roofline"] for k, r in bdone.items() if k[3] == "eager" and r.get("roofline")
        }
        for ws in cfg.world_sizes:
            todo = [
                t
                for t in tasks
                if ws in t.get("world_sizes", [ws])
                and any(
                    (t["task_id"], t["content_hash"], ws, b) not in bdone
                    or (cfg.retry_failed and bdone[(t["task_id"], t["content_hash"], ws, b)]["status"] == "failed")
                    for b in self.wanted(t)
                )
            ]
            if not cfg.quiet:
                print(
                    f"gpu pass: world size {ws}, {cfg.backend}, size {cfg.size}: {len(todo)} tasks to run "
                    f"({len(tasks)} selected)",
                    flush=True,
                )
            if not todo:
                continue
            prog, pools, measured = Progress(len(todo), f"gpu ws={ws}"), [], []

            def open_pool(env: dict[str, str] | None = None, ws: int = ws) -> RankPool:
                pools.append(
                    RankPool(
                        ws,
                        cfg.backend,
                        pg_timeout_s=max(cfg.check_timeout_s * 2, 120),
                        extra_handlers=["mgbench.validation.gpu.handlers"],
                        env={**RANK_ENV, **(env or {})},
                    )
                )
                return pools[-1]

            def one(pool: RankPool, t: dict[str, Any], ws: int = ws) -> str:
                if not measured:
                    measured.append(self.hardware(pool))
                if cfg.max_seconds and time.monotonic() - self.t0 > cfg.max_seconds:
                    return SKIPPED
                return self.run_task(pool, t, ws, vdone, bdone)

            for t, msg in with_cpu_group_retry(open_pool, todo, one, lambda t, msg: msg == CPU_GROUP):
                self.stats["skipped" if msg == SKIPPED else "tasks"] += 1
                if not cfg.quiet and msg != SKIPPED:
                    prog.step(t["task_id"], msg)
            self.stats["restarts"] = self.stats.get("restarts", 0) + sum(p.restarts for p in pools)
        self.stats["wall_s"] = time.monotonic() - self.t0
        return self.stats
