"""Capture runs: a candidate's test callers, rendered as harness modules, run on 2 and 4 sandboxed gloo
ranks with a recorder in place of the candidate's entry (record.py). The first caller whose every rank
reaches the entry gives the arguments it really passed; fitted to size expressions (fit.py) they are kept
in SCRAPE/captured.jsonl, which `scrape harness` reads as the first source of a candidate's arguments.

Test code is untrusted like any mined code: it runs only in the sandbox's rank processes (confined, with
the audit hook and a memory limit), each world size within TIMEOUT_S.
"""

from __future__ import annotations

import ast
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mgbench.scrapers.harness.inputs.discovery.callsites import EVIDENCE, Want
from mgbench.scrapers.harness.inputs.discovery.callsites import load as load_evidence
from mgbench.scrapers.harness.inputs.discovery.capture.caller import caller_candidate
from mgbench.scrapers.harness.inputs.discovery.capture.fit import fit_args
from mgbench.scrapers.harness.inputs.discovery.capture.record import KEPT_IMPORTS
from mgbench.scrapers.harness.inputs.discovery.evidence import entry_node
from mgbench.scrapers.harness.inputs.discovery.guess import evidence_spec
from mgbench.scrapers.harness.inputs.discovery.name_guess import call_params
from mgbench.scrapers.harness.make.checkout import checkout, selected
from mgbench.scrapers.harness.make.inline import inline_candidate
from mgbench.scrapers.harness.make.render import SMOKE_N, RenderReject, prepare, task_source
from mgbench.scrapers.harness.make.splice import apply, tolerant
from mgbench.scrapers.harness.run import probe
from mgbench.scrapers.harness.run.child import confine_rank, send_reply
from mgbench.scrapers.harness.run.sandbox import spawn_ranks
from mgbench.store import append_jsonl, latest_by, rewrite_jsonl

CAPTURED = "captured.jsonl"
WORLD_SIZES = (2, 4)
TIMEOUT_S = 30.0
MEM_MB = 3072


@dataclass
class Capture:
    """What the capture of one candidate found: the caller used (path::unit), its status (captured,
    unfitted: reached but no argument could be fitted, or why no caller reached the entry), the fitted
    arguments and the raw records (ws -> per rank: name -> record)."""

    id: str
    status: str
    caller: str = ""
    reason: str = ""
    args: dict[str, dict[str, Any]] = field(default_factory=dict)
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    tried: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)  # the entry's parameters in call order


def caller_module(callee: dict[str, Any], caller: dict[str, Any], root: Path) -> str:
    """The harness module of the test unit `caller` (its file with the repository helpers it imports
    inlined, imports it cannot have stood in for, and a spec guessed for the unit's own parameters)."""
    text = (root / caller["path"]).read_text(errors="replace")
    pseudo = caller_candidate(callee, caller, text)
    if pseudo is None:
        raise RenderReject(f"{caller['path']}: no unit {caller['class']}.{caller['function']}")
    rec = inline_candidate(pseudo, text, root).to_dict()
    if rec.get("prelude"):
        # helpers' module-level statements that fail here (a CUDA platform check) leave their names unbound
        # rather than failing the load: what the test reaches is recorded, nothing of this module ships
        rec["prelude"] = tolerant(rec["prelude"])
    source = apply(text, rec)
    prep = prepare(source, keep_roots=KEPT_IMPORTS)
    return task_source(pseudo, prep, evidence_spec(pseudo, source)[0], inlined=rec.get("spans"))


def capture_rank(
    rank: int,
    ws: int,
    port: int,
    source: str,
    payload: dict[str, Any],
    conn: Any,
    tmp: str,
    timeout_s: float,
    mem_mb: int,
) -> None:
    """One rank of a capture run: load the caller's module, put the recorder in place, call the caller."""
    import random

    import torch

    from mgbench.scrapers.harness.inputs.discovery.capture.record import Captured, install
    from mgbench.validation.contract import load_module

    path = f"{tmp}/candidate_r{rank}.py"
    reply: dict[str, Any]
    try:
        confine_rank(rank, ws, port, source, tmp, timeout_s, mem_mb)
        mod = load_module(path)
        got: dict[str, Any] = {}
        if not install(vars(mod), payload["entry"], payload["kind"], payload["params"], got, payload["module"]):
            reply = {"ok": False, "error": {"type": "NotBound", "msg": "the caller's module binds no entry"}}
        else:
            # each rank its own seed: only values a test deliberately shares look replicated
            torch.manual_seed(1 + rank)
            random.seed(1 + rank)
            try:
                mod.solution(*mod._mg_inputs(mod._MG_SPEC, rank, ws, 0, "cpu", SMOKE_N))
            except Captured:
                pass
            reply = (
                {"ok": True, "args": got["args"]}  # (a test's bare `except:` may have swallowed Captured)
                if "args" in got
                else {"ok": False, "error": {"type": "NotReached", "msg": "the caller returned first"}}
            )
    except BaseException as e:  # noqa: BLE001 - what the test does wrong is data
        reply = {"ok": False, "error": probe.describe(e, path)}
    send_reply(conn, reply)


def _why(replies: list[dict[str, Any] | None], status: str, reason: str) -> str:
    for r in replies:
        if r and not r["ok"]:
            e = r["error"]
            return f"{e.get('type', '')}: {e.get('msg') or e.get('message', '')} [{e.get('line', '')}]"[:240]
    return reason or status


def entry_params(callee: dict[str, Any], module_text: str | None = None) -> list[str]:
    """The parameters a caller passes, in order: the record's (without self/cls/ctx), or for an
    autograd.Function (whose record has none) its `forward`'s after ctx, read from `module_text`."""
    names = [p["name"] for p in call_params(callee) if p["kind"] not in ("vararg", "varkw")]
    if names or callee["kind"] != "autograd_function" or not module_text:
        return names
    node = entry_node(ast.parse(module_text), callee["entry"], callee["kind"])
    if node is None:
        return []
    return [a.arg for a in node.args.posonlyargs + node.args.args][1:] + [a.arg for a in node.args.kwonlyargs]


def capture_one(
    callee: dict[str, Any], callers: list[dict[str, Any]], root: Path, module_text: str | None = None
) -> Capture:
    """Try the callers in order; the first that reaches the entry on every rank of every world size wins."""
    cap = Capture(callee["id"], "no_caller")
    payload = {
        "entry": callee["entry"],
        "kind": callee["kind"],
        "params": entry_params(callee, module_text),
        "module": Want(callee).module,
    }
    cap.params = payload["params"]
    for caller in callers:
        name = f"{caller['path']}::{caller['class'] + '.' if caller['class'] else ''}{caller['function']}"
        cap.tried.append(name)
        try:
            source = caller_module(callee, caller, root)
        except Exception as e:  # noqa: BLE001 - a test file the renderer cannot take: try the next caller
            cap.status, cap.reason = "unrenderable", f"{name}: {type(e).__name__}: {e}"[:240]
            continue
        records: dict[str, list[dict[str, Any]]] = {}
        for ws in WORLD_SIZES:
            replies, status, reason = spawn_ranks(capture_rank, ws, source, payload, TIMEOUT_S, MEM_MB)
            viol = [v for r in replies if r for v in r.get("violations", [])]
            if status != "ok" or viol or not all(r and r["ok"] for r in replies):
                cap.status, cap.reason = (
                    "not_reached",
                    f"{name} at ws={ws}: {viol[0] if viol else _why(replies, status, reason)}",
                )
                break
            records[str(ws)] = [r["args"] for r in replies]  # type: ignore[index]
        else:
            args = fit_args({int(ws): recs for ws, recs in records.items()})
            cap.caller, cap.records, cap.args = name, records, args
            cap.status, cap.reason = ("captured", "") if args else ("unfitted", "no argument could be fitted")
            return cap
    return cap


def run(
    scrape_dir: Path | str, src: Path | str, jobs: int = 2, ids: list[str] | None = None, quiet: bool = False
) -> Path:
    """Capture every selected candidate with test callers in SCRAPE/evidence.jsonl that has no line in
    SCRAPE/captured.jsonl yet, whatever its status (appends: a re-run resumes; delete a candidate's lines
    to try it again)."""
    scrape_dir = Path(scrape_dir)
    dest = scrape_dir / CAPTURED
    evidence = load_evidence(scrape_dir / EVIDENCE)
    done = latest_by(dest, lambda r: r["id"])
    todo = [
        c
        for c in selected(scrape_dir)
        if evidence.get(c["id"], {}).get("callers") and c["id"] not in done and (ids is None or c["id"] in ids)
    ]
    t0, count = time.monotonic(), [0]

    def one(c: dict[str, Any]) -> None:
        root = checkout(src, c["provenance"]["repo"])
        try:
            text = (scrape_dir / c["module_path"]).read_text()
            cap = capture_one(c, evidence[c["id"]]["callers"], root, text) if root else Capture(c["id"], "no_checkout")
        except Exception as e:  # noqa: BLE001 - one candidate's broken files must not stop the others
            cap = Capture(c["id"], "error", reason=f"{type(e).__name__}: {e}"[:240])
        append_jsonl(dest, asdict(cap))
        count[0] += 1
        if not quiet:
            print(
                f"[{count[0]}/{len(todo)} {time.monotonic() - t0:.0f}s] {c['qualname']}: {cap.status}",
                cap.reason[:90],
                flush=True,
            )

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        list(ex.map(one, todo))
    return dest


def load(path: Path | str) -> dict[str, dict[str, Any]]:
    """Candidate id -> its captured record, where its last line's status is "captured"; {} when the file
    does not exist. Read as the other append-only results are (mgbench.store): a torn line of a killed
    run is skipped with a warning naming the file and line."""
    return {k: r for k, r in latest_by(Path(path), lambda r: r["id"]).items() if r.get("status") == "captured"}


def refit(path: Path | str) -> int:
    """Fit every record of a captured.jsonl again with the current fit.py (the runs' raw records are kept:
    a change of the fit needs no new runs); the file is replaced whole. Returns the candidates captured."""
    path = Path(path)
    rows = list(latest_by(path, lambda r: r["id"]).values())
    for r in rows:
        if r["status"] in ("captured", "unfitted"):
            r["args"] = fit_args({int(ws): recs for ws, recs in r["records"].items()})
            r["status"], r["reason"] = ("captured", "") if r["args"] else ("unfitted", "no argument could be fitted")
    rewrite_jsonl(path, rows)
    return sum(r["status"] == "captured" for r in rows)


def summary(path: Path | str, among: set[str] | None = None) -> str:
    """Counts by status of a captured.jsonl (only ids `among`, when given) and the commonest reasons."""
    rows = list(latest_by(Path(path), lambda r: r["id"]).values())
    rows = [r for r in rows if among is None or r["id"] in among]
    status = Counter(r["status"] for r in rows)
    why = Counter(r["reason"].split(": ", 1)[-1][:70] for r in rows if r["status"] != "captured")
    lines = [f"{len(rows)} candidates with test callers: " + ", ".join(f"{k} {v}" for k, v in status.most_common())]
    lines += [f"  {v:4d}  {k}" for k, v in why.most_common(12)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="record the arguments test callers pass to harness candidates")
    ap.add_argument("--out", required=True, help="scrape folder with candidates.jsonl and evidence.jsonl")
    ap.add_argument("--src", required=True, help="folder of the repositories' checkouts (SRC/<name>)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--id", action="append", dest="ids", help="only these candidate ids")
    ap.add_argument("--summary", action="store_true", help="only print the counts of OUT/captured.jsonl")
    ap.add_argument("--refit", action="store_true", help="only fit OUT/captured.jsonl's records again")
    args = ap.parse_args(argv)
    if args.refit:
        print(f"{refit(Path(args.out) / CAPTURED)} captured after refitting {Path(args.out) / CAPTURED}")
        return 0
    if args.summary:
        print(summary(Path(args.out) / CAPTURED, set(args.ids) if args.ids else None))
        return 0
    if not (Path(args.out) / EVIDENCE).exists():
        print(
            f"capture: {Path(args.out) / EVIDENCE}: no call-site evidence "
            "(run mgbench.scrapers.harness.inputs.discovery.callsites)",
            file=sys.stderr,
        )
        return 2
    dest = run(args.out, args.src, args.jobs, args.ids)
    print(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
