"""`mgbench scrape settle`: settle the accepted results of a harness.jsonl that lack the settled keys.

Each record is settled by scrapers/harness/run/settle.py (2 sandboxed gloo ranks per record, J records in
flight) and appended to the file as it finishes (the store's later lines supersede earlier ones), so a
killed run resumes where it stopped; at the end the file is compacted atomically (one line per id, in
their first order). A record that cannot be settled (no candidate, no module, no spec) gets one line
naming the file, line and reason, and the exit code is 1."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mgbench.scrapers.harness.run.settle import nbytes_note, settle_record, settled
from mgbench.store import append_jsonl, latest_by, read_jsonl, rewrite_jsonl


def unsettled(harness: Path) -> list[str]:
    """Ids of the accepted results (latest record per id) whose spec has not been settled."""
    latest = latest_by(harness, lambda r: r.get("id", ""))
    return [k for k, r in latest.items() if r.get("accepted") and not settled(r.get("spec"))]


def settle_file(
    harness: Path | str,
    scrape_dir: Path | str,
    jobs: int = 1,
    limit: int | None = None,
    quiet: bool = False,
    settle: Any = None,
) -> tuple[int, list[str]]:
    """Settle up to `limit` unsettled accepted records of `harness`; (settled count, one line per bad record).
    `settle(cand, res, scrape_dir)` settles one result in place (default: settle.py `settle_record`)."""
    harness, scrape_dir = Path(harness), Path(scrape_dir)
    settle = settle or settle_record
    if not harness.is_file():
        raise FileNotFoundError(f"{harness}: no harness results (run `mgbench scrape harness` first)")
    bad: list[str] = []
    order: list[str] = []
    latest: dict[str, dict[str, Any]] = {}
    where: dict[str, int] = {}
    with harness.open() as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                bad.append(f"{harness}:{i}: unreadable line ({e.msg}); left as it is")
                continue
            if not isinstance(r, dict) or not r.get("id"):
                bad.append(f"{harness}:{i}: a record without an id; left as it is")
                continue
            if r["id"] not in latest:
                order.append(r["id"])
            latest[r["id"]], where[r["id"]] = r, i
    cands = _candidates(scrape_dir, set(latest))
    todo = []
    for k in order:
        r = latest[k]
        if not r.get("accepted") or settled(r.get("spec")):
            continue
        why = _unusable(r, cands.get(k), scrape_dir)
        if why:
            bad.append(f"{harness}:{where[k]}: record {k}: {why}")
        else:
            todo.append(k)
    todo = todo[:limit] if limit is not None else todo
    lock, t0, count = threading.Lock(), time.monotonic(), [0]

    def one(k: str) -> None:
        res = json.loads(json.dumps(latest[k]))
        settle(cands[k], res, scrape_dir)
        with lock:
            append_jsonl(harness, res)
            latest[k] = res
            count[0] += 1
            if not quiet:
                what = nbytes_note(res["spec"]) if settled(res["spec"]) else res.get("settle_error", "")[:100]
                print(
                    f"[{count[0]}/{len(todo)} {time.monotonic() - t0:.0f}s] {res.get('repo', '')} {k}: {what}",
                    flush=True,
                )

    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
            list(ex.map(one, todo))
    finally:
        lines = [line for line in harness.read_text().splitlines() if line.strip()]
        kept = [json.loads(line) for line in lines if _is_record(line)]
        if len(kept) == len(lines) > len(order):  # compact (superseded lines out) when every line reads
            final = {r["id"]: r for r in kept if isinstance(r, dict) and r.get("id")}
            rewrite_jsonl(harness, [final[k] for k in order if k in final])
    return count[0], bad


def _is_record(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def _candidates(scrape_dir: Path, ids: set[str]) -> dict[str, dict[str, Any]]:
    path = scrape_dir / "candidates.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no candidates (is --out the scrape folder of the harness run?)")
    return {c["id"]: c for c in read_jsonl(path) if c.get("id") in ids}


def _unusable(r: dict[str, Any], cand: dict[str, Any] | None, scrape_dir: Path) -> str:
    """Why an accepted record cannot be settled ('' when it can)."""
    if not isinstance(r.get("spec"), dict) or not {"args", "entry", "kind"} <= set(r["spec"]):
        return "accepted but without a harness spec (args, entry, kind)"
    if cand is None:
        return f"no candidate with this id in {scrape_dir / 'candidates.jsonl'}"
    if not cand.get("module_path") or not (scrape_dir / cand["module_path"]).is_file():
        return f"its candidate module {cand.get('module_path')!r} is missing under {scrape_dir}"
    return ""
