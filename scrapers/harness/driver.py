"""The road every candidate takes through the harness's three rooms; resumable; yield report per repository.

For each selected candidate of a scrape folder (make/checkout.py `selected`): its repository helpers
inlined (make/inline.py, with `--src`), the curated registry's reviewed entry looked up (curated/), the
search run from the entry's inputs, or from the discovery aid's guesses without one (inputs/search.py,
inputs/initial.py), and an accepted harness settled (run/settle.py); one line per candidate in
harness.jsonl. The level-4 gate (scrapers/level4/gate.py) then decides what ships."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from mgbench.scrapers.harness.curated import default as curated_registry
from mgbench.scrapers.harness.inputs.discovery.callsites import EVIDENCE
from mgbench.scrapers.harness.inputs.discovery.callsites import load as load_evidence
from mgbench.scrapers.harness.inputs.discovery.capture.run import CAPTURED
from mgbench.scrapers.harness.inputs.discovery.capture.run import load as load_captured
from mgbench.scrapers.harness.inputs.discovery.guess import evidence_spec, is_captured
from mgbench.scrapers.harness.inputs.search import Budget, synthesize
from mgbench.scrapers.harness.make.checkout import checkout, selected
from mgbench.scrapers.harness.make.splice import apply, tolerant
from mgbench.scrapers.harness.run.settle import settle_record
from mgbench.store import append_jsonl, latest_by

RESULTS = "harness.jsonl"
# production-sized weights (a 4096 x 14336 bf16 matrix is 117 MiB) are drawn even at smoke size: a curated
# entry's search runs with more memory and time per attempt than a guessed one
CURATED_MEM_MB = 4096
CURATED_ATTEMPT_S = 30.0
CURATED_SEARCH_S = 90.0
INLINE = "inline.jsonl"


def inline_all(
    cands: list[dict[str, Any]], scrape_dir: Path, src: Path | str | None, dest: Path, max_lines: int | None = None
) -> dict[str, Any]:
    """Inline records (mgbench.scrapers.harness.make.inline) of the candidates, per repository (parse cache), kept in
    DEST/inline.jsonl so that a resumed run does not redo them."""
    from mgbench.scrapers.harness.make.inline import MAX_LINES, inline_candidate

    path = dest.parent / INLINE
    done = latest_by(path, lambda r: r["id"])
    for c in sorted(cands, key=lambda c: (c["provenance"]["repo"], c["provenance"]["path"])):
        root = checkout(src, c["provenance"]["repo"])
        if c["id"] in done or root is None:
            continue
        try:
            rec = inline_candidate(
                c, (scrape_dir / c["module_path"]).read_text(), root, max_lines or MAX_LINES
            ).to_dict()
        except Exception as e:  # noqa: BLE001 - a parse failure of one file only loses the inlining
            rec = {"names": [], "skipped": {"*": f"{type(e).__name__}: {e}"[:200]}}
        done[c["id"]] = {"id": c["id"], **rec}
        append_jsonl(path, done[c["id"]])
    return done


def run(
    scrape_dir: Path | str,
    out: Path | str | None = None,
    jobs: int = 1,
    limit: int | None = None,
    budget: Budget = Budget(),
    ids: Iterable[str] | None = None,
    shuffle_seed: int = 0,
    quiet: bool = False,
    src: Path | str | None = None,
    inline_lines: int | None = None,
    trace: bool = False,
    settle: bool = True,
) -> Path:
    """Synthesize a harness for every selected candidate not done yet; results in OUT/harness.jsonl.

    Candidates are visited in a seeded shuffled order, so a `limit` gives an unbiased sample. With
    `src` (a folder of checkouts), repository helpers the candidates import are inlined first. `trace`
    prints every attempt's spec and outcome (use with `ids`). Every accepted result is settled
    (scrapers/harness/run/settle.py: output mode, mutated inputs, full size by bytes) unless `settle` is False."""
    scrape_dir = Path(scrape_dir)
    dest = Path(out or scrape_dir) / RESULTS
    done = latest_by(dest, lambda r: r["id"])
    cands = selected(scrape_dir)
    if ids:
        want = set(ids)
        cands = [c for c in cands if c["id"] in want]
    random.Random(shuffle_seed).shuffle(cands)
    todo = [c for c in cands if c["id"] not in done][: limit if limit is not None else None]
    dest.parent.mkdir(parents=True, exist_ok=True)
    inlined = inline_all(todo, scrape_dir, src, dest, inline_lines) if src is not None else {}
    evidence = load_evidence(scrape_dir / EVIDENCE)  # call sites precomputed from the checkouts (callsites.py)
    captured = load_captured(scrape_dir / CAPTURED)  # arguments test callers passed (capture/run.py)
    curated = curated_registry()  # reviewed inputs per mined problem (scrapers/harness/curated)
    lock, t0, count = threading.Lock(), time.monotonic(), [0]

    def attempt(
        c: dict[str, Any], rec: dict[str, Any], raw: str, tr: Any, budget: Budget = budget
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """One candidate's search (with its inlined helpers, without them when they fail to load, with their
        failing statements skipped; its captured arguments; numpy's stand-in): the result and inline record."""
        res = synthesize(c, apply(raw, rec), budget, tr).to_dict()
        if rec.get("names") and not res["accepted"] and res["at_load"]:
            # the inlined helpers may raise when loaded (a platform check at module level): try without them,
            # and keep that only if it is accepted (else the first result stands)
            plain = synthesize(c, raw, budget, tr).to_dict()
            if plain["accepted"]:
                rec = {
                    **rec,
                    "names": [],
                    "skipped": {**rec.get("skipped", {}), "*": f"prelude failed to load: {res['last_error'][:160]}"},
                }
                res = plain
            elif (guarded := tolerant(rec["prelude"])) != rec["prelude"]:
                # or with the helpers' failing module-level statements skipped (their names stay unbound)
                rec2 = {**rec, "prelude": guarded, "lines": guarded.count("\n")}
                alt = synthesize(c, apply(raw, rec2), budget, tr).to_dict()
                if alt["accepted"]:
                    rec, res = rec2, alt
        if c.get("captured"):
            res = _with_capture(c, res, lambda cand: synthesize(cand, apply(raw, rec), budget, tr).to_dict(), raw)
        if res["reason"].startswith("needs_import: numpy"):
            # numpy used for scalar arithmetic: again with the stand-in (only then: other tasks' text stays)
            plain = {k: v for k, v in c.items() if k != "captured"}  # its captured arguments had their try
            alt = synthesize({**plain, "numpy": True}, apply(raw, rec), budget, tr).to_dict()
            if alt["accepted"]:
                res = {**alt, **({"captured": "dropped (numpy stand-in)"} if c.get("captured") else {})}
        return res, rec

    def one(c: dict[str, Any]) -> None:
        c = {**c, "evidence": evidence[c["id"]]} if c["id"] in evidence else c
        c = {**c, "captured": captured[c["id"]]} if c["id"] in captured else c
        raw = (scrape_dir / c["module_path"]).read_text()
        tr = (lambda line: print(f"  {c['id']} {line}", flush=True)) if trace else None
        entry = curated.match(c)
        if entry is not None and entry.verdict == "ship":
            # the reviewed inputs first (the capture is no longer needed); the guesses only as a fallback
            pinned = {**{k: v for k, v in c.items() if k != "captured"}, "curated": entry.pinned()}
            roomy = replace(
                budget,
                mem_mb=max(budget.mem_mb, CURATED_MEM_MB),
                attempt_timeout_s=max(budget.attempt_timeout_s, CURATED_ATTEMPT_S),
                seconds=max(budget.seconds, CURATED_SEARCH_S),
            )
            res, rec = _with_curated(
                pinned,
                attempt(pinned, inlined.get(c["id"]) or {}, raw, tr, roomy),
                lambda: attempt(c, inlined.get(c["id"]) or {}, raw, tr),
            )
        else:
            res, rec = attempt(c, inlined.get(c["id"]) or {}, raw, tr)
        if rec.get("names"):
            res["inline"] = {k: rec[k] for k in ("names", "spans", "prelude", "lines")}
        if rec.get("skipped"):
            res["inline_skipped"] = rec["skipped"]
        res["module_path"] = c["module_path"]
        res["role"] = c.get("role")
        if settle and res["accepted"]:
            settle_record(c, res, scrape_dir, tr)
        with lock:
            append_jsonl(dest, res)
            count[0] += 1
            if not quiet:
                verdict = f"ACCEPTED ws={res['world_sizes']}" if res["accepted"] else res["reason"][:90]
                print(
                    f"[{count[0]}/{len(todo)} {time.monotonic() - t0:.0f}s] {c['provenance']['repo']} "
                    f"{c['qualname']}: {verdict}",
                    flush=True,
                )

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        list(ex.map(one, todo))
    return dest


def _with_capture(
    c: dict[str, Any], res: dict[str, Any], search: Any, module_text: str | None = None
) -> dict[str, Any]:
    """The result with the captured arguments when the search accepted them as captured; else the search
    from the guesses alone, when that is accepted (a capture that had to be mutated away, or that does not
    fit the object state drawn for a method, is no better than the guess). `captured` records which."""
    initial, changed = evidence_spec(c, module_text)
    applied = {a["name"]: _no_keyword(a) for a in initial["args"] if is_captured(changed.get(a["name"], ""), c)}
    spec_args = {a["name"]: _no_keyword(a) for a in (res.get("spec") or {}).get("args", [])}
    kept = bool(applied) and all(spec_args.get(n) == a for n, a in applied.items())
    if res["accepted"] and kept:
        return {**res, "captured": c["captured"]["caller"]}
    plain = search({k: v for k, v in c.items() if k != "captured"})
    if plain["accepted"] or not res["accepted"]:
        return {**plain, "captured": f"dropped ({'mutated away' if res['accepted'] else 'not accepted'})"}
    return {**res, "captured": f"{c['captured']['caller']} (partly mutated)"}


def _with_curated(c: dict[str, Any], tried: tuple[dict[str, Any], Any], fallback: Any) -> tuple[dict[str, Any], Any]:
    """(result, inline record) with the registry's inputs when the search accepted them unchanged (every
    curated argument and attribute in the accepted spec as the entry gives it); else `fallback()`'s, the
    search from the evidence and guesses, with `curated` saying why the entry's inputs were dropped (the
    gate does not ship such a task: scrapers/level4/gate.py `reviewed`)."""
    res, rec = tried
    pin = c["curated"]
    spec = res.get("spec") or {}
    got = {a["name"]: _no_keyword(a) for a in spec.get("args", [])}
    got_attrs = {a["name"]: _no_keyword(a) for a in spec.get("attrs", [])}
    changed = [n for n, a in pin["args"].items() if got.get(n) != _no_keyword(a)]
    changed += [n for n, a in pin["attrs"].items() if got_attrs.get(n) != _no_keyword(a)]
    if res["accepted"] and not changed:
        return {**res, "curated": pin["id"]}, rec
    why = f"mutated away: {', '.join(changed)}" if res["accepted"] else f"not accepted: {res['reason'][:160]}"
    plain, plain_rec = fallback()
    return {**plain, "curated": f"dropped ({why})"}, plain_rec


def _no_keyword(a: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in a.items() if k != "keyword"}


def _is_test(c: dict[str, Any]) -> bool:
    """A test-file candidate (pytest/unittest code): reported both inside and outside the denominator."""
    return c.get("role") == "test"


SYNC_ONLY = {"barrier", "monitored_barrier"}
OBJECT_OPS = {"all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list"}


def comm_class(c: dict[str, Any]) -> str:
    """`tensor data` when a call site moves tensors; else `barrier only` or `objects/barrier only` (such
    an entry synchronises or exchanges Python objects: no tensor output depends on other ranks), or
    `referenced, not called` (the op is a value: an FX graph node, a dispatch table)."""
    calls = c.get("calls", [])
    ops = {call.get("op") for call in calls}
    if not ops:
        return "not recorded"
    if all(call.get("kind") == "reference" for call in calls):
        return "referenced, not called"
    if ops <= SYNC_ONLY:
        return "barrier only"
    return "objects/barrier only" if ops <= SYNC_ONLY | OBJECT_OPS else "tensor data"


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
        for pre in ["", "lib_"] if lib else [""]:
            per[r["repo"]][pre + "tried"] += 1
            per[r["repo"]][pre + "accepted"] += r["accepted"]
        per[r["repo"]]["ws4"] += 4 in r["world_sizes"]
        if not r["accepted"]:
            reasons[r["reason"].split(":")[0] + (" (test file)" if not lib else "")] += 1
    lines = [
        "| repository | eligible | tried | accepted | accepted % of tried | also ws 4 | tried, no tests | "
        "accepted, no tests | % no tests |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    tot = Counter()
    for repo in sorted(eligible, key=lambda k: -eligible[k]):
        p = per[repo]
        tot.update({"eligible": eligible[repo], **p})
        lines.append(_row(repo, eligible[repo], p))
    lines.append(_row("**total**", tot["eligible"], tot))
    lines += ["", "| rejection reason | candidates |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1])]
    lines += ["", "| what the candidate communicates | tried | accepted | % |", "|---|---|---|---|"]
    by_comm: dict[str, Counter] = defaultdict(Counter)
    for r in recs:
        k = comm_class(cands.get(r["id"], {}))
        by_comm[k]["tried"] += 1
        by_comm[k]["accepted"] += r["accepted"]
    lines += [
        f"| {k} | {v['tried']} | {v['accepted']} | {100 * v['accepted'] / max(1, v['tried']):.0f}% |"
        for k, v in sorted(by_comm.items())
    ]
    imports = Counter(
        r["reason"].split(": ", 1)[1].split(".")[0] for r in recs if r["reason"].startswith("needs_import")
    )
    lines += ["", "needs_import by top-level module: " + ", ".join(f"{k} {v}" for k, v in imports.most_common(12))]
    return "\n".join(lines)


def _row(name: str, eligible: int, p: Counter) -> str:
    return (
        f"| {name} | {eligible} | {p['tried']} | {p['accepted']} | {100 * p['accepted'] / max(1, p['tried']):.0f}% | "
        f"{p['ws4']} | {p['lib_tried']} | {p['lib_accepted']} | "
        f"{100 * p['lib_accepted'] / max(1, p['lib_tried']):.0f}% |"
    )
