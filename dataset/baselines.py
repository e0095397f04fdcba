"""Read per-hardware GPU results: results/<tag>/{hardware.json, baselines.jsonl, validation-*.jsonl}, and
correctness-only folders results/<tag>/{correctness.json, validation-*.jsonl} (no timings).

A results root holds one folder per hardware tag. `hardware.json` describes the machine (tag, GPU
name and count, topology/links, torch/nccl versions, measured ceilings); `baselines.jsonl` has one
line per (task, world size, baseline); `validation-nccl.jsonl` holds ValidationResult lines.
Baselines are matched to tasks by task_id AND content_hash: lines of another version are dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mgbench.store import read_jsonl
from mgbench.validation.topology import text

ROOFLINE_KEYS = ("flops", "hbm_bytes", "comm_bytes", "compute_ms", "memory_ms", "comm_ms", "bound_ms")


def _leaves(d: dict[str, Any], prefix: str = "") -> list[tuple[str, float]]:
    """Numeric leaves of a nested dict as (dotted key, value), sorted."""
    out = []
    for k, v in sorted(d.items()):
        if isinstance(v, dict):
            out += _leaves(v, f"{prefix}{k}.")
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append((f"{prefix}{k}", v))
    return out


def topology_text(topo: Any) -> str:
    """The topology in words (mgbench.validation.topology's text for its records)."""
    return text(topo) if isinstance(topo, dict) else str(topo or "")


@dataclass
class Hardware:
    """One results/<tag>/hardware.json (as mgbench.validation.gpu.run writes it), with the fields the dataset uses."""

    tag: str
    gpu: str
    count: int
    topology: str
    raw: dict[str, Any]

    @classmethod
    def from_json(cls, d: dict[str, Any], tag: str) -> Hardware:
        topo = d.get("topology_text") or topology_text(d.get("topology"))
        return cls(str(d.get("tag") or tag), str(d.get("gpu") or "unknown GPU"), int(d.get("count") or 0), topo, d)

    @property
    def versions(self) -> str:
        return ", ".join(f"{k} {self.raw[k]}" for k in ("torch", "nccl", "cuda", "driver") if self.raw.get(k))

    @property
    def ceilings(self) -> list[tuple[str, float]]:
        ceil = self.raw.get("ceilings")
        return _leaves({k: v for k, v in ceil.items() if k != "link_detail_GBps"}) if isinstance(ceil, dict) else []

    def describe(self) -> str:
        """A few lines for prompts: GPUs, links, versions, ceilings."""
        lines = (
            [f"Hardware `{self.tag}`:", self.topology]
            if self.topology
            else [f"Hardware `{self.tag}`: {self.count}x {self.gpu}."]
        )
        if self.versions:
            lines.append(f"Software: {self.versions}.")
        if self.ceilings:
            lines.append("Measured ceilings: " + ", ".join(f"{k} {v:.4g}" for k, v in self.ceilings) + ".")
        return "\n".join(lines)


@dataclass
class GpuResults:
    """Everything found under the results roots, indexed for row building."""

    hardware: dict[str, Hardware] = field(default_factory=dict)
    baselines: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    validation_files: list[Path] = field(default_factory=list)
    stale: int = 0  # baseline lines of a current task id with an older content hash
    other_tasks: int = 0  # baseline lines of task ids not in this task set

    def for_task(self, task_id: str, content_hash: str) -> list[dict[str, Any]]:
        return self.baselines.get((task_id, content_hash), [])


# The marker of a results/<tag>/ folder of correctness records only (ranks sharing GPUs, or any backend
# whose times are not results): its validation-*.jsonl are read, and nothing in it is ever a timing.
CORRECTNESS_MARKER = "correctness.json"


def marked_dirs(roots: Iterable[Path | str], marker: str) -> list[Path]:
    """Every <root>/<tag>/ folder holding the file `marker`, deduplicated, sorted by tag."""
    seen: dict[Path, Path] = {}
    for root in roots:
        for found in sorted(Path(root).glob(f"*/{marker}")):
            seen.setdefault(found.parent.resolve(), found.parent)
    return sorted(seen.values(), key=lambda p: (p.name, str(p)))


def correctness_dirs(roots: Iterable[Path | str]) -> list[Path]:
    """Every <root>/<tag>/ folder of correctness records only (a correctness.json)."""
    return marked_dirs(roots, CORRECTNESS_MARKER)


def hardware_dirs(roots: Iterable[Path | str]) -> list[Path]:
    """Every <root>/<tag>/ folder of one machine's GPU results (a hardware.json)."""
    return marked_dirs(roots, "hardware.json")


def _num(x: Any) -> float | None:
    return None if x is None else float(x)


def baseline_entry(line: dict[str, Any], hw: Hardware, noise: dict[str, Any] | None) -> dict[str, Any]:
    """One `baselines` struct of the schema from one baselines.jsonl line."""
    roof = line.get("roofline") or {}
    noise = noise or {}
    peak = line.get("peak_mem_bytes")
    return {
        "hardware": hw.tag,
        "gpu": hw.gpu,
        "gpu_count": hw.count,
        "world_size": int(line["world_size"]),
        "baseline": line["baseline"],
        "status": line.get("status", "ok"),
        "reason": line.get("reason") or "",
        **{k: _num(line.get(k)) for k in ("median_ms", "p10_ms", "p90_ms", "cv")},
        "iters": None if line.get("iters") is None else int(line["iters"]),
        "noise_speedup_p50": _num(noise.get("noise_speedup_p50")),
        "noise_speedup_p95": _num(noise.get("noise_speedup_p95")),
        "roofline": {k: _num(roof.get(k)) for k in ROOFLINE_KEYS},
        "fraction_of_roofline": _num(line.get("fraction_of_roofline")),
        "peak_mem_bytes": None if peak is None else int(peak),
    }


def kind(baseline: str) -> str:
    """The baseline's kind: eager, compile, symm_mem (any symm_mem_<name>) or null."""
    return "symm_mem" if baseline.startswith("symm_mem") else baseline


KIND_ORDER = {"eager": 0, "compile": 1, "symm_mem": 2, "null": 3}


def _sort_key(b: dict[str, Any]) -> tuple:
    return (b["hardware"], b["world_size"], KIND_ORDER.get(kind(b["baseline"]), 2), b["baseline"])


def load_gpu_results(roots: Iterable[Path | str], current: set[tuple[str, str]]) -> GpuResults:
    """Read every results/<tag>/ under `roots`; keep baselines of the (task_id, content_hash) in `current`."""
    out = GpuResults()
    ids = {tid for tid, _ in current}
    for d in hardware_dirs(roots):
        hw = Hardware.from_json(json.loads((d / "hardware.json").read_text()), d.name)
        if hw.tag in out.hardware:
            raise ValueError(f"hardware tag {hw.tag!r} appears twice ({d} and another results root)")
        out.hardware[hw.tag] = hw
        out.validation_files += sorted(d.glob("validation-*.jsonl"))
        latest: dict[tuple, dict[str, Any]] = {}
        for line in read_jsonl(d / "baselines.jsonl"):
            key = (line["task_id"], line["content_hash"])
            if key not in current:  # an older version of a task here, or a task of another set
                if line["task_id"] in ids:
                    out.stale += 1
                else:
                    out.other_tasks += 1
                continue
            latest[(*key, int(line["world_size"]), line["baseline"])] = line
        nulls = {k[:3]: v for k, v in latest.items() if k[3] == "null"}
        for (tid, h, ws, _), line in latest.items():
            out.baselines.setdefault((tid, h), []).append(baseline_entry(line, hw, nulls.get((tid, h, ws))))
    for entries in out.baselines.values():
        entries.sort(key=_sort_key)
    for d in correctness_dirs(roots):
        if (d / "hardware.json").exists():
            raise ValueError(f"{d}: a correctness-only folder ({CORRECTNESS_MARKER}) must not hold hardware.json")
        out.validation_files += sorted(d.glob("validation-*.jsonl"))
    return out
