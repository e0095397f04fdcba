"""`mgbench scrape report`: the funnel per repository, skip reasons and label distributions."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from mgbench.report import table

FUNNEL_COLS = [
    ("files_scanned", "files"),
    ("files_prefiltered", "parsed"),
    ("files_with_collectives", "w/ coll"),
    ("call_sites", "calls"),
    ("functions_extracted", "functions"),
    ("unique", "unique"),
    ("license_permitted", "permitted"),
    ("classified", "classified"),
    ("kernels", "kernels"),
]


def load_funnel(out: Path) -> dict:
    p = out / "funnel.json"
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no scrape results here (run `mgbench scrape local|github` first)")
    return json.loads(p.read_text())


def funnel_table(data: dict) -> str:
    rows = []
    for f in [*data["repos"], data["total"]]:
        rate = f["files_scanned"] / f["seconds"] * 60 if f.get("seconds") else 0
        rows.append([f["repo"], *(f[k] for k, _ in FUNNEL_COLS), f"{rate:.0f}", sum(f["skipped"].values())])
    return table(rows, ["repo", *(h for _, h in FUNNEL_COLS), "files/min", "skipped"])


def skip_table(data: dict) -> str:
    reasons = sorted({r for f in data["repos"] for r in f["skipped"]})
    if not reasons:
        return "no files skipped"
    rows = [[f["repo"], *(f["skipped"].get(r, 0) for r in reasons)] for f in data["repos"] if f["skipped"]]
    return table(rows, ["repo", *reasons])


def label_summary(out: Path) -> str:
    """Distribution of workloads, dims and realizations over unique, permitted candidates."""
    p = out / "candidates.jsonl"
    if not p.is_file():
        return ""
    wl, dims, reals, fams = Counter(), Counter(), Counter(), Counter()
    with p.open() as f:
        for line in f:
            c = json.loads(line)
            if not (c["unique"] and c["license_permitted"] and c["classification"]):
                continue
            cl = c["classification"]
            wl[cl["workload"]["id"]] += 1
            dims.update(d["id"] for d in cl["dims"])
            reals.update(r["id"] for r in cl["realizations"])
            fams.update(cl["families"][:1])

    def line(name: str, c: Counter) -> str:
        return f"{name}: " + ", ".join(f"{k} {v}" for k, v in c.most_common(12))

    return "\n".join([line("workloads", wl), line("dims", dims), line("realizations", reals), line("top family", fams)])


def kernel_summary(out: Path) -> str:
    p = out / "kernels.jsonl"
    if not p.is_file():
        return ""
    by_repo, pats, mechs = Counter(), Counter(), Counter()
    with p.open() as f:
        for line in f:
            k = json.loads(line)
            by_repo[k["repo"]] += 1
            pats.update(k["patterns"] or ["(unknown)"])
            mechs.update(k["mechanisms"] or ["(not visible)"])
    if not by_repo:
        return "no library kernels indexed"
    return (
        f"kernels: {sum(by_repo.values())} in {len(by_repo)} repos; patterns: "
        + ", ".join(f"{k} {v}" for k, v in pats.most_common())
        + "; mechanisms: "
        + ", ".join(f"{k} {v}" for k, v in mechs.most_common())
    )


def render(out: Path) -> str:
    data = load_funnel(out)
    parts = [
        "Funnel (files scanned -> parsed -> with collectives -> functions extracted -> unique "
        "-> license-permitted -> classified):",
        funnel_table(data),
        "",
        "Skipped, by reason:",
        skip_table(data),
        "",
        label_summary(out),
        kernel_summary(out),
    ]
    return "\n".join(p for p in parts if p is not None)
