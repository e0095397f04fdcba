"""Run harness synthesis over a scrape folder's candidates; resumable; yield report per repository."""
from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable

from scrapers.harness.search import Budget, synthesize
from validation.store import append_jsonl, latest_by

RESULTS = "harness.jsonl"


def selected(scrape_dir: Path) -> list[dict[str, Any]]:
    """Unique, license-permitted candidates with an extracted module."""
    out = []
    with (scrape_dir / "candidates.jsonl").open() as f:
        for line in f:
            c = json.loads(line)
            if c.get("unique") and c.get("license_permitted") and c.get("module_path"):
                out.append(c)
    return out


def run(scrape_dir: Path | str, out: Path | str | None = None, jobs: int = 1, limit: int | None = None,
        budget: Budget = Budget(), ids: Iterable[str] | None = None, shuffle_seed: int = 0,
        quiet: bool = False) -> Path:
    """Synthesize a harness for every selected candidate not done yet; results in OUT/harness.jsonl.

    Candidates are visited in a seeded shuffled order, so a `limit` gives an unbiased sample."""
    scrape_dir = Path(scrape_dir)
    dest = Path(out or scrape_dir) / RESULTS
    done = latest_by(dest, lambda r: r["id"])
    cands = selected(scrape_dir)
    if ids:
        want = set(ids)
        cands = [c for c in cands if c["id"] in want]
    random.Random(shuffle_seed).shuffle(cands)
    todo = [c for c in cands if c["id"] not in done][: limit if limit is not None else None]
    lock, t0, count = threading.Lock(), time.monotonic(), [0]

    def one(c: dict[str, Any]) -> None:
        text = (scrape_dir / c["module_path"]).read_text()
        res = synthesize(c, text, budget).to_dict()
        res["module_path"] = c["module_path"]
        res["role"] = c.get("role")
        with lock:
            append_jsonl(dest, res)
            count[0] += 1
            if not quiet:
                print(f"[{count[0]}/{len(todo)} {time.monotonic() - t0:.0f}s] {c['provenance']['repo']} "
                      f"{c['qualname']}: {'ACCEPTED ws=' + str(res['world_sizes']) if res['accepted'] else res['reason'][:90]}",
                      flush=True)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        list(ex.map(one, todo))
    return dest


def _is_test(c: dict[str, Any]) -> bool:
    """A test-file candidate (pytest/unittest code): reported both inside and outside the denominator."""
    return c.get("role") == "test"


def report(scrape_dir: Path | str, out: Path | str | None = None) -> str:
    """Yield per repository (all candidates, and without test files), counts per rejection reason."""
    scrape_dir = Path(scrape_dir)
    recs = list(latest_by(Path(out or scrape_dir) / RESULTS, lambda r: r["id"]).values())
    cands = {c["id"]: c for c in selected(scrape_dir)}
    eligible = Counter(c["provenance"]["repo"] for c in cands.values())
    per: dict[str, Counter] = defaultdict(Counter)
    reasons: Counter = Counter()
    for r in recs:
        lib = "" if _is_test(cands.get(r["id"], {})) else "lib_"
        for pre in (["", "lib_"] if lib else [""]):
            per[r["repo"]][pre + "tried"] += 1
            per[r["repo"]][pre + "accepted"] += r["accepted"]
        per[r["repo"]]["ws4"] += 4 in r["world_sizes"]
        if not r["accepted"]:
            reasons[r["reason"].split(":")[0] + (" (test file)" if not lib else "")] += 1
    lines = ["| repository | eligible | tried | accepted | accepted % of tried | also ws 4 | tried, no tests | "
             "accepted, no tests | % no tests |", "|---|---|---|---|---|---|---|---|---|"]
    tot = Counter()
    for repo in sorted(eligible, key=lambda k: -eligible[k]):
        p = per[repo]
        tot.update({"eligible": eligible[repo], **p})
        lines.append(_row(repo, eligible[repo], p))
    lines.append(_row("**total**", tot["eligible"], tot))
    lines += ["", "| rejection reason | candidates |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1])]
    imports = Counter(r["reason"].split(": ", 1)[1].split(".")[0] for r in recs
                      if r["reason"].startswith("needs_import"))
    lines += ["", "needs_import by top-level module: " + ", ".join(f"{k} {v}" for k, v in imports.most_common(12))]
    return "\n".join(lines)


def _row(name: str, eligible: int, p: Counter) -> str:
    return (f"| {name} | {eligible} | {p['tried']} | {p['accepted']} | {100 * p['accepted'] / max(1, p['tried']):.0f}% | "
            f"{p['ws4']} | {p['lib_tried']} | {p['lib_accepted']} | "
            f"{100 * p['lib_accepted'] / max(1, p['lib_tried']):.0f}% |")
