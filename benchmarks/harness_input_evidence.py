"""How the repository's evidence changes the harness's initial specs (inputs as its callers pass them).

For every selected candidate of a scrape folder, the initial spec with name guesses only and with the
evidence (cached call sites from an evidence.jsonl built by
`python -m mgbench.scrapers.harness.inputs.discovery.callsites`, the docstring, shape comments and body usage
from the module text) are computed (no child runs) and compared:
bf16 tensors, tensors of rank > 1, tensors drawn for non-tensor parameters, bool flags, uneven splits,
rank-valued arguments and whether they stay in range at world sizes 2 and 4, callables by value.

    PYTHONPATH=. python benchmarks/harness_input_evidence.py --out SCRAPE [--evidence FILE] [--results H.jsonl]

With --results (a harness.jsonl), the figures are printed again for its accepted candidates only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mgbench.scrapers.harness.inputs.discovery.callsites import EVIDENCE, load  # noqa: E402
from mgbench.scrapers.harness.inputs.discovery.guess import evidence_spec  # noqa: E402
from mgbench.scrapers.harness.make.checkout import selected  # noqa: E402

RANK_NAME = re.compile(r"(^|_)(src|dst|root|peer|rank)$")  # `src_tp` (a parallel size) is no rank


def _in_range(expr: str) -> bool:
    """Every rank's value of `expr` is a rank (0 <= v < ws) at world sizes 2 and 4 (n = 8)."""
    try:
        vals = [eval(expr, {"__builtins__": {}}, {"n": 8, "ws": ws, "rank": r}) for ws in (2, 4) for r in range(ws)]
    except Exception:  # noqa: BLE001 - an expression the runtime would also fail on
        return False
    return all(0 <= v < ws for v, ws in zip(vals, [2, 2, 4, 4, 4, 4]))


def figures(specs: list[tuple[dict[str, Any], dict[str, str]]]) -> Counter:
    """Counts over the arguments of the (spec, changes) pairs."""
    c: Counter = Counter()
    for spec, changed in specs:
        tensors = [a for a in spec["args"] if a["kind"] in ("tensor", "tensors")]
        c["candidates"] += 1
        c["candidates with a tensor"] += bool(tensors)
        c["candidates with only 1-D tensors"] += bool(tensors) and all(len(a.get("shape", ["n"])) == 1 for a in tensors)
        for a in spec["args"]:
            c["args"] += 1
            if a["kind"] in ("tensor", "tensors"):
                c["tensor args"] += 1
                c["bf16 tensor args"] += a.get("dtype") == "bfloat16"
                c["tensor args of rank > 1"] += len(a.get("shape", ["n"])) > 1
            c["bool args"] += a["kind"] == "bool"
            c["uneven splits"] += a["kind"] == "splits" and "i" in re.findall(r"\w+", a.get("expr", ""))
            c[f"fn args = {a.get('value')}"] += a["kind"] == "fn"
            if a["kind"] == "int" and (RANK_NAME.search(a["name"].lower()) or "rank" in changed.get(a["name"], "")):
                c["rank-valued int args"] += 1
                c["rank-valued int args in range at ws 2, 4"] += _in_range(a.get("expr", "n"))
            why = changed.get(a["name"], "")
            if why.startswith("pending:"):
                c["splits with routing evidence (uneven once the runtime binds `i`)"] += 1
                continue
            if why.startswith("tensor->"):
                c["tensor for a non-tensor parameter, fixed"] += 1
                c[f"  tensor->{why.split('->')[1].split()[0]}"] += 1
            if why:
                c["args changed by evidence"] += 1
                for part in why.split("; "):
                    src = part.split(" by ", 1)[-1].split()[0]
                    c[f"  changed by source: {src}"] += 1
    return Counter({k: v for k, v in c.items() if v})


def compare(cands: list[dict[str, Any]], scrape: Path, evidence: dict[str, Any]) -> tuple[Counter, Counter]:
    before, after = [], []
    for cand in cands:
        text = (scrape / cand["module_path"]).read_text()
        before.append(evidence_spec(cand, text, use_evidence=False))
        rec = {**cand, "evidence": evidence[cand["id"]]} if cand["id"] in evidence else cand
        after.append(evidence_spec(rec, text))
    return figures(before), figures(after)


def table(title: str, b: Counter, a: Counter) -> str:
    keys = sorted(set(b) | set(a), key=lambda k: (k.startswith("  "), k.startswith("fn"), k))
    rows = [f"## {title}", "", "| figure | name guesses | with evidence |", "|---|---|---|"]
    rows += [f"| {k} | {b.get(k, 0)} | {a.get(k, 0)} |" for k in keys]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="scrape folder (candidates.jsonl, modules/)")
    ap.add_argument("--evidence", help="evidence.jsonl (default: OUT/evidence.jsonl)")
    ap.add_argument("--results", help="a harness.jsonl: also the figures over its accepted candidates")
    args = ap.parse_args(argv)
    scrape = Path(args.out)
    evidence = load(Path(args.evidence) if args.evidence else scrape / EVIDENCE)
    cands = selected(scrape)
    print(
        table(
            f"all {len(cands)} candidates ({len(evidence)} with cached call-site evidence)",
            *compare(cands, scrape, evidence),
        )
    )
    if args.results:
        ok = {json.loads(line)["id"] for line in open(args.results) if json.loads(line)["accepted"]}
        acc = [c for c in cands if c["id"] in ok]
        print()
        print(table(f"the {len(acc)} accepted in {args.results}", *compare(acc, scrape, evidence)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
