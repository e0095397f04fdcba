"""ParallelKernelBench as a peer repository: how many of its problems' entry functions (`solution` of
reference/<N>_<name>.py) get an accepted harness, and whether the synthesized arguments are of the same
kind as those PKB's own input builder passes (tensor rank, dtype family, split evenness, scalar kind).

PKB's inputs come from its `utils/input_output_tensors.py: create_input_tensor(rank, world_size,
problem_id, base_shape, dtype, device=...)`, read from the checkout at run time and called only in two
child rank processes (gloo, world size 2, CPU, base shape --shape, float32): the peer's code is never
imported here. A child reports each input's kind (never its values, except the integers of a split
list); a problem whose builder fails gets the reason. The synthesized side is the accepted spec of the
problem's `solution` candidate in --harness (its argument kinds: scrapers/harness/make/specs.py SCHEMA); a
problem whose `solution` is a duplicate of another problem's (same code) counts that one's harness.

Kinds compared per positional argument of PKB's tuple (the i-th parameter of `solution`):
tensor (rank, dtype family float/int/bool/complex), tensors (a list of them), ints (a list of ints:
even when every entry and both ranks agree; a spec `splits` is even when its expression does not use
`rank`), int, float, bool, str, none, dtype, group, other. An argument the spec leaves out is the
parameter's default (its literal's kind). Mismatch causes: rank, dtype family, splits, scalar kind
(two different scalar kinds), kind (tensor vs scalar vs list...), missing (PKB passes a value where the
spec keeps a default it cannot take).

Usage: python benchmarks/pkb_entry_kinds.py --pkb /work/pkb --harness RES/harness.jsonl \\
       --candidates SCRAPE/candidates.jsonl [--json out.json] [--shape 64 64]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

_PROBLEM = re.compile(r"^(\d+)_(\w+)\.py$")
SCALARS = ("int", "float", "bool", "str", "none")


def problems(pkb: Path) -> dict[int, str]:
    """Problem number -> file name of PKB's reference/ (the files named <N>_<name>.py)."""
    return {int(m.group(1)): p.name for p in (pkb / "reference").iterdir() if (m := _PROBLEM.match(p.name))}


# ---- child side: runs in a rank process, may import PKB ----


def _family(dtype: Any) -> str:
    s = str(dtype).replace("torch.", "")
    if s == "bool":
        return "bool"
    if s.startswith("complex"):
        return "complex"
    if s.startswith(("float", "bfloat", "half", "double")):
        return "float"
    return "int"


SCALAR_KINDS = ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (type(None), "none"))  # bool first


def _scalar_kind(v: Any) -> dict[str, Any] | None:
    """The kind of a Python scalar (a PKB input or a spec literal), else None."""
    return next(({"kind": kind} for t, kind in SCALAR_KINDS if isinstance(v, t)), None)


def describe(v: Any) -> dict[str, Any]:
    """The kind of one input value (JSON)."""
    import torch
    import torch.distributed as dist

    if isinstance(v, torch.Tensor):
        return {"kind": "tensor", "rank": v.dim(), "family": _family(v.dtype)}
    if isinstance(v, torch.nn.Module):
        return {"kind": "module"}
    if (scalar := _scalar_kind(v)) is not None:
        return scalar
    if isinstance(v, torch.dtype):
        return {"kind": "dtype"}
    if isinstance(v, dist.ProcessGroup):
        return {"kind": "group"}
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return {"kind": "ints", "values": list(v)}
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, torch.Tensor) for x in v):
        return {"kind": "tensors", "rank": v[0].dim(), "family": _family(v[0].dtype), "count": len(v)}
    return {"kind": "other", "type": type(v).__name__}


def child(rank: int, pkb: str, store: str, ids: list[int], shape: tuple[int, int], out: str) -> None:
    """One rank: PKB's inputs of every problem in `ids`, one JSON line each (flushed as it goes)."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=2, timeout=timedelta(seconds=30)
    )
    sys.path.insert(0, pkb)
    from utils.input_output_tensors import create_input_tensor  # the peer's code, in this child only

    with open(out, "a") as f:
        for pid in ids:
            try:
                x = create_input_tensor(rank, 2, pid, shape, torch.float32, device="cpu")
                x = x if isinstance(x, tuple) else (x,)
                rec = {"id": pid, "args": [describe(v) for v in x]}
            except Exception as e:  # noqa: BLE001 - a problem whose builder fails is reported, not fatal
                rec = {"id": pid, "error": f"{type(e).__name__}: {e}"[:200]}
            f.write(json.dumps(rec) + "\n")
            f.flush()


def pkb_inputs(pkb: Path, ids: list[int], shape: tuple[int, int], timeout: float = 240) -> dict[int, Any]:
    """Problem -> {"ranks": [args of rank 0, args of rank 1]} or {"error": reason}, from rank pairs in child
    processes; a pair that hangs or dies is restarted after the problem it stopped at."""
    got: dict[int, Any] = {}
    todo = list(ids)
    while todo:
        with tempfile.TemporaryDirectory() as tmp:
            outs = [os.path.join(tmp, f"rank{r}.jsonl") for r in (0, 1)]
            cmd = [sys.executable, __file__, "--child", "--pkb", str(pkb), "--store", os.path.join(tmp, "store")]
            cmd += ["--shape", *map(str, shape), "--ids", ",".join(map(str, todo))]
            procs = [
                subprocess.Popen(
                    [*cmd, "--rank", str(r), "--out", outs[r]],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                    cwd=tmp,
                )
                for r in (0, 1)
            ]
            t0, errs = time.monotonic(), []
            for p in procs:
                try:
                    errs.append(p.communicate(timeout=max(1, timeout - (time.monotonic() - t0)))[1])
                except subprocess.TimeoutExpired:
                    p.kill()
                    errs.append(p.communicate()[1] + " [timed out]")
            recs = [
                {r["id"]: r for r in map(json.loads, Path(o).read_text().splitlines())} if Path(o).exists() else {}
                for o in outs
            ]
        done = [i for i in todo if i in recs[0] and i in recs[1]]
        for i in done:
            err = recs[0][i].get("error") or recs[1][i].get("error")
            got[i] = {"error": err} if err else {"ranks": [recs[0][i]["args"], recs[1][i]["args"]]}
        rest = [i for i in todo if i not in got]
        if rest:  # the pair stopped at rest[0]: report it, go on with the others
            tail = " | ".join(e.strip().splitlines()[-1] for e in errs if e.strip())[:200]
            got[rest[0]] = {"error": f"rank processes stopped: {tail or 'no output'}"}
            rest = rest[1:]
        todo = rest
    return got


# ---- main side: kinds of PKB inputs and of synthesized specs, compared ----


def pkb_kind(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """One argument's kind over both ranks (ints: even when all entries and both ranks agree)."""
    a, b = ranks
    if a["kind"] == "ints":
        vals = a["values"] + (b["values"] if b["kind"] == "ints" else [])
        return {"kind": "ints", "even": len(set(vals)) == 1 and a == b}
    return {k: v for k, v in a.items() if k != "count"}


def _literal_kind(value: Any) -> dict[str, Any]:
    if (scalar := _scalar_kind(value)) is not None:
        return scalar
    if isinstance(value, (list, tuple)) and value and all(isinstance(x, int) for x in value):
        return {"kind": "ints", "even": len(set(value)) == 1}
    return {"kind": "other", "type": type(value).__name__}


def spec_kind(a: dict[str, Any] | None, default: str | None) -> dict[str, Any]:
    """The kind of a synthesized argument (None: the parameter's default, from its source text)."""
    if a is None:
        if default is None:
            return {"kind": "missing"}
        try:
            return _literal_kind(ast.literal_eval(default))
        except (ValueError, SyntaxError):
            return {"kind": "other", "type": default}
    k = a["kind"]
    if k in ("tensor", "tensors"):
        return {"kind": k, "rank": len(a.get("shape", ["n"])), "family": _family(a.get("dtype", "float32"))}
    if k == "splits":
        return {"kind": "ints", "even": "rank" not in str(a.get("expr", "n"))}
    if k in ("const", "literal"):
        return _literal_kind(a.get("value"))
    if k == "linear":  # an nn.Linear: a module
        return {"kind": "module"}
    if k in ("int", "float", "bool", "none", "dtype", "group", "module"):
        return {"kind": k}
    return {"kind": "other", "type": k}


def mismatch(p: dict[str, Any], s: dict[str, Any]) -> list[str]:
    """Causes of a mismatch between PKB's kind `p` and the synthesized kind `s` ([] when they agree)."""
    if s["kind"] == "missing":
        return ["missing"]
    if p["kind"] != s["kind"]:
        return ["scalar kind"] if p["kind"] in SCALARS and s["kind"] in SCALARS else ["kind"]
    if p["kind"] in ("tensor", "tensors"):
        return [c for c, k in (("rank", "rank"), ("dtype family", "family")) if p[k] != s[k]]
    if p["kind"] == "ints":
        return [] if p["even"] == s["even"] else ["splits"]
    return []


def _fmt(k: dict[str, Any]) -> str:
    if k["kind"] in ("tensor", "tensors"):
        return f"{k['kind']}{k['rank']}d/{k['family']}"
    if k["kind"] == "ints":
        return "ints/" + ("even" if k["even"] else "uneven")
    return k["kind"] + (f"({k['type']})" if "type" in k else "")


def harness_of(cands_path: Path, harness_path: Path) -> dict[int, dict[str, Any]]:
    """Problem -> {"cand": its solution candidate, "res": the harness result of it or of its cluster's
    representative, "dup_of": the representative's problem when it is another's}."""
    cands = [json.loads(x) for x in cands_path.read_text().splitlines() if x.strip()]
    byid = {c["id"]: c for c in cands}
    results: dict[str, dict[str, Any]] = {}
    for line in harness_path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            results[r["id"]] = r  # the latest line of an id wins (the driver appends)
    out = {}
    for c in cands:
        m = _PROBLEM.match(os.path.basename(c["provenance"]["path"]))
        if c["qualname"] != "solution" or not m or not c["provenance"]["path"].startswith("reference/"):
            continue
        rep = byid.get(c.get("cluster") or c["id"], c)
        rm = _PROBLEM.match(os.path.basename(rep["provenance"]["path"]))
        dup = int(rm.group(1)) if rep["id"] != c["id"] and rm else None
        out[int(m.group(1))] = {"cand": c, "res": results.get(rep["id"]), "dup_of": dup}
    return out


def compare(pid: int, h: dict[str, Any] | None, inp: dict[str, Any]) -> dict[str, Any]:
    """The per-problem row: accepted?, and per PKB argument its kind, the synthesized kind and the causes."""
    res = (h or {}).get("res") or {}
    row: dict[str, Any] = {"problem": pid, "accepted": bool(res.get("accepted")), "dup_of": (h or {}).get("dup_of")}
    row["reason"] = "" if row["accepted"] else (res.get("reason") or ("no candidate" if h is None else "not run"))
    if "error" in inp:
        row["pkb_error"] = inp["error"]
        return row
    if not row["accepted"]:
        return row
    params = [p for p in h["cand"]["params"] if p["kind"] in ("positional", "vararg")]
    spec = {a["name"]: a for a in res["spec"]["args"]}
    args = []
    for i, pair in enumerate(zip(*inp["ranks"])):
        prm = params[min(i, len(params) - 1)] if params else {"name": f"#{i}", "default": None}
        pk = pkb_kind(list(pair))
        sk = spec_kind(spec.get(prm["name"]), prm.get("default"))
        args.append({"name": prm["name"], "pkb": _fmt(pk), "synth": _fmt(sk), "causes": mismatch(pk, sk)})
    row["args"] = args
    row["same_kind"] = all(not a["causes"] for a in args)
    return row


def summary(rows: list[dict[str, Any]], total: int) -> dict[str, Any]:
    acc = [r for r in rows if r["accepted"]]
    cmp_ = [r for r in acc if "args" in r]
    same = [r for r in cmp_ if r["same_kind"]]
    causes = Counter(c for r in cmp_ for a in r["args"] for c in set(a["causes"]))
    problems_by_cause = Counter(c for r in cmp_ for c in {c for a in r["args"] for c in a["causes"]})
    return {
        "problems": total,
        "accepted": len(acc),
        "accepted_own_harness": sum(1 for r in acc if not r["dup_of"]),
        "compared": len(cmp_),
        "same_kind": len(same),
        "same_kind_rate": round(len(same) / len(cmp_), 3) if cmp_ else 0.0,
        "pkb_input_errors": sum(1 for r in rows if "pkb_error" in r),
        "mismatched_args_by_cause": dict(causes.most_common()),
        "mismatched_problems_by_cause": dict(problems_by_cause.most_common()),
        "rejections": dict(Counter(r["reason"].split(":")[0] for r in rows if not r["accepted"]).most_common()),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pkb", type=Path, default=Path("/work/pkb"), help="ParallelKernelBench checkout")
    ap.add_argument("--harness", type=Path, help="harness.jsonl of a run over the PKB scrape")
    ap.add_argument("--candidates", type=Path, help="candidates.jsonl of the PKB scrape")
    ap.add_argument("--json", type=Path, help="write the rows and the summary here")
    ap.add_argument("--shape", type=int, nargs=2, default=[64, 64], help="PKB base_shape (M, N)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    ap.add_argument("--ids", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.rank, str(args.pkb), args.store, [int(x) for x in args.ids.split(",")], tuple(args.shape), args.out)
        return 0
    if not (args.harness and args.candidates):
        ap.error("--harness and --candidates are required")
    for p in (args.pkb / "reference", args.pkb / "utils" / "input_output_tensors.py", args.harness, args.candidates):
        if not p.exists():
            print(f"pkb_entry_kinds: {p}: not found", file=sys.stderr)
            return 2
    probs = problems(args.pkb)
    hs = harness_of(args.candidates, args.harness)
    inputs = pkb_inputs(args.pkb, sorted(probs), tuple(args.shape))
    rows = [compare(pid, hs.get(pid), inputs[pid]) for pid in sorted(probs)]
    print("| problem | accepted | arguments: PKB kind / synthesized kind (x: mismatch cause) |")
    print("|---|---|---|")
    for r in rows:
        name = probs[r["problem"]].removesuffix(".py")
        acc = ("yes" + (f" (dup of {r['dup_of']})" if r["dup_of"] else "")) if r["accepted"] else "no"
        if "pkb_error" in r:
            detail = f"PKB inputs failed: {r['pkb_error']}"
        elif "args" in r:
            detail = "; ".join(
                f"{a['name']}: {a['pkb']}" + (f" / {a['synth']} x {','.join(a['causes'])}" if a["causes"] else " ok")
                for a in r["args"]
            )
        else:
            detail = r["reason"][:90]
        print(f"| {name} | {acc} | {detail} |")
    s = summary(rows, len(probs))
    print()
    print(f"accepted: {s['accepted']}/{s['problems']} (target >= 60; own harness {s['accepted_own_harness']})")
    print(
        f"same kind: {s['same_kind']}/{s['compared']} accepted problems with PKB inputs = "
        f"{100 * s['same_kind_rate']:.1f}% (target >= 70%)"
    )
    print(f"PKB input builder failures: {s['pkb_input_errors']}")
    print("mismatched problems by cause:", ", ".join(f"{k} {v}" for k, v in s["mismatched_problems_by_cause"].items()))
    print("mismatched arguments by cause:", ", ".join(f"{k} {v}" for k, v in s["mismatched_args_by_cause"].items()))
    print("not accepted by reason:", ", ".join(f"{k} {v}" for k, v in s["rejections"].items()))
    if args.json:
        args.json.write_text(json.dumps({"summary": s, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
