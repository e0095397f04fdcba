"""Compare two runs of benchmarks/heldout_eval.py candidate by candidate: whether each held-out candidate was
judged alike (on gloo and on the shared-GPU mode, say), by the same rule.

    python3 benchmarks/heldout_compare.py A.jsonl B.jsonl [--names gloo shared-gpu]

A and B are heldout_eval's results files (`--results`), each with its triggers file beside it where there is
one (`<stem>-fired.jsonl`). Per candidate (one verdict per run: the last for the candidate): the verdict and
rule in each run and how they compare:
- `same`: same verdict, same rule (or both correct);
- `same verdict`: both rejected (incorrect, error or timeout), by other rules;
- `unfired`: a conditional cheat judged correct in one run without its trigger firing, rejected in the other
  (the run where it did honest work shows nothing of the rule);
- `differs`: correct in one run, rejected in the other, with its trigger fired or not known;
- `only A` / `only B`: judged in one run.
Prints the table and the counts; exits 1 if a candidate `differs`, 2 if a file cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import heldout_eval  # noqa: E402

from mgbench.report import table  # noqa: E402
from mgbench.store import latest_by  # noqa: E402


def load_run(results: Path) -> dict[tuple[str, int | None], tuple[dict, bool | None]]:
    """(sample, world size) -> (its last verdict, whether its trigger fired: None if the candidate is not
    conditional or the run recorded no trigger for that verdict)."""
    triggers = heldout_eval.load_triggers(results)
    out = {}
    for rec in latest_by(results, lambda r: (r.get("sample"), r.get("world_size"))).values():
        if rec.get("sample") is None or "status" not in rec:
            raise ValueError(f"{results}: a line with no sample or status: not heldout_eval's results")
        out[(rec["sample"], rec.get("world_size"))] = (rec, heldout_eval.trigger_of(rec, triggers))
    return out


def verdict(rec: dict) -> str:
    """`correct`, or the status and the rule that decided."""
    if rec["status"] == "correct":
        return "correct"
    return f"{rec['status']} {heldout_eval._rule(rec.get('reason') or '')}"


def agreement(a: tuple[dict, bool | None] | None, b: tuple[dict, bool | None] | None) -> str:
    """How one candidate's two verdicts compare (the classes of the module's docstring)."""
    if a is None or b is None:
        return "only B" if a is None else "only A"
    (ra, fa), (rb, fb) = a, b
    ca, cb = ra["status"] == "correct", rb["status"] == "correct"
    if ca and cb:
        return "same"
    if not ca and not cb:
        return "same" if verdict(ra) == verdict(rb) else "same verdict"
    if (ca and fa is False) or (cb and fb is False):
        return "unfired"
    return "differs"


def compare(a: Path, b: Path, names: tuple[str, str]) -> tuple[str, Counter]:
    """The comparison table and the count of each class."""
    run_a, run_b = load_run(a), load_run(b)
    rows, counts = [], Counter()
    for key in sorted(set(run_a) | set(run_b), key=str):
        sample, world_size = key
        how = agreement(run_a.get(key), run_b.get(key))
        counts[how] += 1
        cells = [verdict(r[0]) if r else "-" for r in (run_a.get(key), run_b.get(key))]
        source = heldout_eval.CHEATS / sample
        expect = heldout_eval._expected(source) if source.exists() else "?"
        rows.append([heldout_eval._stem(sample), world_size, expect, *(c[:60] for c in cells), how])
    return table(rows, ["candidate", "world", "expect", names[0], names[1], "how"]), counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--names", nargs=2, default=("A", "B"), help="the two runs' column names")
    args = ap.parse_args(argv)
    for path in (args.a, args.b):
        if not path.is_file():
            print(f"{path}: no such results file", file=sys.stderr)
            return 2
    try:
        text, counts = compare(args.a, args.b, tuple(args.names))
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    print(text)
    order = ["same", "same verdict", "unfired", "differs", "only A", "only B"]
    print("\n" + ", ".join(f"{counts[k]} {k}" for k in order if counts[k]) + f" (of {sum(counts.values())})")
    return 1 if counts["differs"] else 0


if __name__ == "__main__":
    sys.exit(main())
