"""The card's figures, drawn from the rows' baselines (matplotlib Agg, deterministic PNG bytes).

- plots/fraction_of_roofline.png: each family's fraction of roofline, per baseline and hardware.
- plots/time_vs_bytes.png: baseline median time against the bytes each rank communicates.
"""

from __future__ import annotations

import io
import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mgbench.dataset.baselines import kind  # noqa: E402
from mgbench.dataset.shards import write_if_changed  # noqa: E402

KIND_STYLE = {"eager": ("o", "tab:blue"), "compile": ("s", "tab:orange"), "symm_mem": ("^", "tab:green")}
LEVEL_COLORS = {1: "tab:blue", 2: "tab:orange", 3: "tab:green", 4: "tab:red"}


def measured(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(row, baseline) for every timed, non-null baseline."""
    return [
        (r, b)
        for r in rows
        for b in r["baselines"]
        if b["status"] == "ok" and b["baseline"] != "null" and b["median_ms"] is not None
    ]


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def fraction_figure(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> bytes:
    """One panel per hardware tag: a row per family, a dot per baseline measurement."""
    tags = sorted({b["hardware"] for _, b in pairs})
    families = sorted({r["family"] for r, _ in pairs}, reverse=True)
    fig, axes = plt.subplots(
        1, len(tags), figsize=(6.5 * len(tags), 0.32 * len(families) + 1.6), squeeze=False, sharey=True
    )
    for ax, tag in zip(axes[0], tags):
        seen = set()
        for k, (marker, color) in KIND_STYLE.items():
            offset = list(KIND_STYLE).index(k) * 0.22 - 0.22
            pts = [
                (b["fraction_of_roofline"], families.index(r["family"]) + offset)
                for r, b in pairs
                if b["hardware"] == tag and kind(b["baseline"]) == k and b["fraction_of_roofline"] is not None
            ]
            if pts:
                ax.scatter(
                    [p[0] for p in pts],
                    [p[1] for p in pts],
                    marker=marker,
                    color=color,
                    s=18,
                    alpha=0.75,
                    label=k if k not in seen else None,
                )
                seen.add(k)
        ax.set_yticks(range(len(families)), families)
        ax.set_xlim(0, 1.05)
        ax.axvline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("fraction of roofline (bound_ms / median_ms)")
        ax.set_title(f"{tag}: fraction of roofline by family")
        ax.grid(axis="x", alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return _png(fig)


def time_bytes_figure(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> bytes:
    """One log-log panel per hardware tag: median ms vs per-rank comm bytes, coloured by level."""
    pairs = [(r, b) for r, b in pairs if (b["roofline"]["comm_bytes"] or 0) > 0]
    tags = sorted({b["hardware"] for _, b in pairs})
    fig, axes = plt.subplots(1, max(len(tags), 1), figsize=(6.5 * max(len(tags), 1), 4.6), squeeze=False)
    for ax, tag in zip(axes[0], tags):
        here = [(r, b) for r, b in pairs if b["hardware"] == tag]
        for level in sorted({r["level"] for r, _ in here}):
            pts = [(b["roofline"]["comm_bytes"], b["median_ms"]) for r, b in here if r["level"] == level]
            ax.scatter(*zip(*pts), s=14, alpha=0.7, color=LEVEL_COLORS.get(level, "k"), label=f"level {level}")
        rates = [b["roofline"]["comm_bytes"] / b["roofline"]["comm_ms"] for _, b in here if b["roofline"]["comm_ms"]]
        if rates:
            rate = statistics.median(rates)  # bytes per ms implied by the roofline's comm term
            xs = sorted(b["roofline"]["comm_bytes"] for _, b in here)
            ax.plot(
                [xs[0], xs[-1]],
                [xs[0] / rate, xs[-1] / rate],
                "k--",
                lw=1,
                label=f"comm roofline ({rate / 1e6:.4g} GB/s)",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ys = [b["median_ms"] for _, b in here]
        ax.set_ylim(min(ys) / 3, max(ys) * 3)  # the roofline line may leave the frame
        ax.set_xlabel("bytes communicated per rank")
        ax.set_ylabel("baseline median time (ms)")
        ax.set_title(f"{tag}: baseline time vs bytes moved")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)


def write_plots(rows: list[dict[str, Any]], folder: Path) -> dict[str, str]:
    """Write the figures under folder/plots/ (removing stale ones); {name: relative path}."""
    pairs = measured(rows)
    out_dir = folder / "plots"
    made: dict[str, str] = {}
    if pairs:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, draw in (("fraction_of_roofline", fraction_figure), ("time_vs_bytes", time_bytes_figure)):
            write_if_changed(out_dir / f"{name}.png", draw(pairs))
            made[name] = f"plots/{name}.png"
    for stale in out_dir.glob("*.png") if out_dir.is_dir() else ():
        if f"plots/{stale.name}" not in made.values():
            stale.unlink()
    return made
