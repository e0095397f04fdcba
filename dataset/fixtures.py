"""Synthetic GPU results for tests and demos, in the exact format the GPU runs write.

`write_fake_results(root, manifest_dir)` writes root/<tag>/hardware.json, baselines.jsonl (eager,
compile, null and, for level >= 2, one symm_mem baseline per task and world size) and
validation-nccl.jsonl (passed, except the ids in `fail`). Numbers are made up but consistent:
deterministic in the task id, bound_ms = max of the three roofline terms, fraction = bound/median.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mgbench.store import load_manifest

FAKE_HARDWARE = {
    "tag": "fake-h200x2",
    "gpu": "NVIDIA H200 (synthetic fixture)",
    "count": 2,
    "topology": {
        "gpu": "NVIDIA H200 (synthetic fixture)",
        "count": 2,
        "memory_MiB": 143771,
        "pairs": [
            {"a": "GPU0", "b": "GPU1", "link": "NV18", "kind": "nvlink", "nvlinks": 18, "GBps_per_direction": 478.1}
        ],
        "nvlink_GBps_per_link": 26.562,
        "nvlink_multicast": False,
    },
    "topology_text": "2x NVIDIA H200 (synthetic fixture), one process (rank) per GPU.\n"
    "Link between the two GPUs: NVLink x18, about 478 GB/s per direction.",
    "torch": "2.11.0+cu130",
    "nccl": "2.28.9",
    "ceilings": {
        "matmul_tflops": {"bfloat16": 805.6},
        "hbm_GBps": 4218.5,
        "link_GBps": 393.2,
        "units": {"link_GBps": "GB/s per direction to one peer"},
    },
}


def _unit(task_id: str, salt: str) -> float:
    """A deterministic number in [0, 1) from the task id."""
    h = hashlib.sha256(f"{task_id}:{salt}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def _elements(task: dict[str, Any]) -> int:
    """A plausible element count of the full size: n for one parameter, a matrix for several."""
    vals = [v for v in task.get("sizes", {}).get("full", {}).values() if isinstance(v, int) and v > 0]
    prod = math.prod(vals) if vals else 1
    return max(int(prod ** (2 / len(vals))) if len(vals) > 1 else prod, 1024)


def _line(
    task: dict[str, Any], ws: int, baseline: str, tag: str, ceil: dict[str, float], eager_ms: float | None = None
) -> dict[str, Any]:
    tid = task["task_id"]
    elem = _elements(task)
    comm = 2.0 * elem * (ws - 1) / ws
    hbm = 6.0 * elem
    flops = 2.0 * elem**1.5 if task.get("level", 1) >= 2 else 0.0
    terms = {
        "compute_ms": flops / (ceil["matmul_tflops"]["bfloat16"] * 1e9),
        "memory_ms": hbm / (ceil["hbm_GBps"] * 1e6),
        "comm_ms": comm / (ceil["link_GBps"] * 1e6),
    }
    bound = max(terms.values())
    slow = {
        "eager": 1.6 + 3 * _unit(tid, "e"),
        "compile": 1.4 + 2.5 * _unit(tid, "c"),
        "null": 1.6 + 3 * _unit(tid, "e"),
    }.get(baseline, 1.1 + _unit(tid, baseline))
    median = max(bound * slow, 0.008 + 0.01 * _unit(tid, "lat"))
    line = {
        "task_id": tid,
        "content_hash": task["content_hash"],
        "hardware": tag,
        "world_size": ws,
        "baseline": baseline,
        "status": "ok",
        "reason": "",
        "median_ms": round(median, 6),
        "p10_ms": round(median * 0.97, 6),
        "p90_ms": round(median * 1.05, 6),
        "cv": round(0.01 + 0.03 * _unit(tid, baseline + "cv"), 4),
        "iters": 200,
        "roofline": {
            "flops": flops,
            "hbm_bytes": hbm,
            "comm_bytes": comm,
            **{k: round(v, 6) for k, v in terms.items()},
            "bound_ms": round(bound, 6),
        },
        "fraction_of_roofline": round(bound / median, 6),
        "peak_mem_bytes": int(hbm * 3),
        "family": task.get("family"),
        "level": task.get("level"),
        "dtype": task.get("dtype"),
        "noise_speedup_p50": None,
        "noise_speedup_p95": None,
    }  # as the GPU runner writes them
    if baseline == "null":
        line["noise_speedup_p50"] = round(0.002 + 0.01 * _unit(tid, "n50"), 4)  # |speedup - 1|
        line["noise_speedup_p95"] = round(0.015 + 0.03 * _unit(tid, "n95"), 4)
    return line


def _validation(task: dict[str, Any], ws: int, passed: bool) -> dict[str, Any]:
    checks = {
        k: True
        for k in ("inputs_deterministic", "inputs_not_mutated", "deterministic", "matches_oracle", "tolerance_sane")
    }
    if not passed:
        checks["matches_oracle"] = False
    return {
        "task_id": task["task_id"],
        "content_hash": task["content_hash"],
        "world_size": ws,
        "size": "full",
        "backend": "nccl",
        "hardware": "cuda",
        "status": "passed" if passed else "failed",
        "reason": "" if passed else "check failed: matches_oracle",
        "checks": checks,
        "tolerance": {"rtol": 0.016, "atol_rel": 0.02},
        "max_error": 0.001,
        "seconds": 1.5,
        "seed": 0,
        "finished_at": 0.0,
    }


def write_fake_results(
    root: Path | str,
    manifest_dir: Path | str,
    hardware: dict[str, Any] | None = None,
    world_sizes: Iterable[int] = (2,),
    fail: Iterable[str] = (),
    compile_fails: Iterable[str] = (),
) -> Path:
    """Write root/<tag>/ for every task of the manifest; returns the folder."""
    hw = dict(hardware or FAKE_HARDWARE)
    folder = Path(root) / hw["tag"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hardware.json").write_text(json.dumps(hw, indent=1, sort_keys=True) + "\n")
    fail, compile_fails = set(fail), set(compile_fails)
    lines, vals = [], []
    for task in load_manifest(manifest_dir):
        for ws in world_sizes:
            if ws not in task.get("world_sizes", [ws]):
                continue
            vals.append(_validation(task, ws, task["task_id"] not in fail))
            names = ["eager", "compile", "null"] + (["symm_mem_fused"] if task.get("level", 1) >= 2 else [])
            for name in names:
                line = _line(task, ws, name, hw["tag"], hw["ceilings"])
                if name == "compile" and task["task_id"] in compile_fails:
                    line.update(
                        status="failed",
                        reason="torch.compile raised (fixture)",
                        median_ms=None,
                        p10_ms=None,
                        p90_ms=None,
                        fraction_of_roofline=None,
                    )
                lines.append(line)
    (folder / "baselines.jsonl").write_text("".join(json.dumps(x, sort_keys=True) + "\n" for x in lines))
    (folder / "validation-nccl.jsonl").write_text("".join(json.dumps(x, sort_keys=True) + "\n" for x in vals))
    return folder
