"""Topology of the GPU machine (model, count, links) from nvidia-smi, and a text form for prompts.

Runs in the orchestrating process, which never touches CUDA itself (the ranks own the GPUs):
`nvidia-smi --query-gpu`, `nvidia-smi topo -m` (the link matrix: NV<k> = k bonded NVLinks,
PIX/PXB/PHB/NODE/SYS = PCIe paths) and `nvidia-smi nvlink -s` (per-link speed).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

LINK_WORDS = {
    "X": "self",
    "PIX": "PCIe, one switch",
    "PXB": "PCIe, several switches",
    "PHB": "PCIe through the host bridge",
    "NODE": "PCIe within a NUMA node",
    "SYS": "PCIe across NUMA nodes (SMP interconnect)",
}


def _smi(*args: str, timeout: float = 20.0) -> str:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return ""
    try:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def parse_gpus(csv: str) -> list[dict[str, Any]]:
    """Rows of `nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader,nounits`."""
    gpus = []
    for line in csv.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 4 and parts[0].isdigit():
            gpus.append(
                {
                    "index": int(parts[0]),
                    "name": parts[1],
                    "memory_MiB": int(float(parts[2])) if parts[2].replace(".", "").isdigit() else None,
                    "driver": parts[3],
                }
            )
    return gpus


def parse_topo_matrix(text: str) -> dict[str, dict[str, str]]:
    """The GPU-to-GPU part of `nvidia-smi topo -m`: {"GPU0": {"GPU1": "NV18", ...}, ...}."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in text.splitlines() if ln.strip()]
    if not lines:
        return {}
    header = lines[0].split()
    gpu_cols = [h for h in header if re.fullmatch(r"GPU\d+", h)]
    out: dict[str, dict[str, str]] = {}
    for ln in lines[1:]:
        cells = ln.split()
        if cells and re.fullmatch(r"GPU\d+", cells[0]):
            out[cells[0]] = dict(zip(gpu_cols, cells[1 : 1 + len(gpu_cols)]))
    return out


def parse_nvlink_speeds(text: str) -> dict[str, list[float]]:
    """Per-GPU list of active link speeds in GB/s from `nvidia-smi nvlink -s`."""
    out: dict[str, list[float]] = {}
    cur = None
    for ln in text.splitlines():
        m = re.match(r"GPU (\d+):", ln.strip())
        if m:
            cur = f"GPU{m.group(1)}"
            out[cur] = []
            continue
        m = re.search(r"Link \d+:\s*([\d.]+)\s*GB/s", ln)
        if m and cur is not None:
            out[cur].append(float(m.group(1)))
    return out


def describe_link(code: str) -> str:
    m = re.fullmatch(r"NV(\d+)", code)
    if m:
        return f"NVLink x{m.group(1)}"
    return LINK_WORDS.get(code, code)


def build(
    gpus: list[dict[str, Any]],
    matrix: dict[str, dict[str, str]],
    speeds: dict[str, list[float]],
    multicast: bool = False,
) -> dict[str, Any]:
    """The topology record stored in hardware.json."""
    pairs = []
    names = sorted(matrix, key=lambda s: int(s[3:]))
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            code = matrix[a].get(b, "?")
            m = re.fullmatch(r"NV(\d+)", code)
            per_link = speeds.get(a, [None])[0] if speeds.get(a) else None
            pairs.append(
                {
                    "a": a,
                    "b": b,
                    "link": code,
                    "kind": "nvlink" if m else "pcie",
                    "nvlinks": int(m.group(1)) if m else 0,
                    "GBps_per_direction": round(int(m.group(1)) * per_link, 1) if m and per_link else None,
                }
            )
    return {
        "gpu": gpus[0]["name"] if gpus else None,
        "count": len(gpus),
        "memory_MiB": gpus[0]["memory_MiB"] if gpus else None,
        "driver": gpus[0]["driver"] if gpus else None,
        "pairs": pairs,
        "nvlink_GBps_per_link": speeds.get(names[0], [None])[0] if names and speeds.get(names[0]) else None,
        "nvlink_multicast": multicast,
    }


def detect() -> dict[str, Any]:
    """Read the topology of this machine (an empty record where nvidia-smi is absent)."""
    gpus = parse_gpus(_smi("--query-gpu=index,name,memory.total,driver_version", "--format=csv,noheader,nounits"))
    topo = _smi("topo", "-m")
    rec = build(gpus, parse_topo_matrix(topo), parse_nvlink_speeds(_smi("nvlink", "-s")))
    rec["topo_matrix"] = topo.strip()
    return rec


def text(rec: dict[str, Any]) -> str:
    """A short description for the solver prompt."""
    if not rec.get("count"):
        return "GPU topology unknown."
    mem = f" ({rec['memory_MiB'] / 1024:.0f} GiB each)" if rec.get("memory_MiB") else ""
    lines = [f"{rec['count']}x {rec['gpu']}{mem}, one process (rank) per GPU."]
    kinds = {p["link"] for p in rec["pairs"]}
    if len(kinds) == 1 and rec["pairs"]:
        p = rec["pairs"][0]
        bw = f", about {p['GBps_per_direction']:.0f} GB/s per direction" if p["GBps_per_direction"] else ""
        scope = "every GPU pair" if rec["count"] > 2 else "the two GPUs"
        lines.append(f"Link between {scope}: {describe_link(p['link'])}{bw} (nvidia-smi topo: {p['link']}).")
    else:
        for p in rec["pairs"]:
            lines.append(f"{p['a']}<->{p['b']}: {describe_link(p['link'])}.")
    lines.append(
        "Peer-to-peer access between GPUs is available (CUDA IPC / symmetric memory); "
        + (
            "NVLink multicast (NVLS) is available."
            if rec.get("nvlink_multicast")
            else "NVLink multicast (NVLS, multimem) is disabled."
        )
    )
    return "\n".join(lines)
