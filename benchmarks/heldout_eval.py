"""Judge the held-out adversarial candidates of benchmarks/heldout_cheats/ with `mgbench eval`.

Two sets, each written by a reader other than the judge's authors:
- the first (41 files, written from the task contract and the README only): 37 cheats (lazy outputs,
  caches, stale memory, reflection, patches, NaN/inf, partial work, side files, fake exits...), 3 honest
  solutions, and a same-host side channel its author filed as a cheat and mgbench accepts (its header says why);
- the second (10 files, 2026-12-06, written after the out-of-process judge landed, from its docs and code,
  by a reviewer agent that saw nothing else): 7 cheats
  (result-file forgery by a self-rewriting sample and by a detached process, a cgroup throttle and CPU
  pinning of the reference, a decoy answered locally, a solution hard-coded to the held-out shape, early
  returns only when calls come back to back), 2 honest solutions and a plain copy of the reference.
- the third (6 files, 2026-12-06, written by a second reviewer agent against the judge with the second
  set's fixes): a helper process obtained from multiprocessing's fork server that hogs the CPU, stops
  the reference in short bursts, or pins it only while it is timed; calls of a timed batch deferred and
  fused into one collective; a wrong solution that caps the reference's memory so its held-out shape is
  skipped; and an honest float32-accumulating solution.
- the fourth (4 files, 2026-12-06, a third reviewer agent, against the judge with the candidate's sandbox):
  a forged `--json` output through the judge's stdout the ranks inherited, helpers that burn CPU inside a
  system call SIGSTOP does not interrupt or fork past the judge's stop scan while the reference is timed,
  and an honest all_gather + float32 sum.
- the fifth (5 files, 2026-12-06, a fourth reviewer agent, against the sandbox with set 4's fixes): a thread
  that reads the judge's batch message before the harness (knowing the batch's length, the calls fuse; the
  same peek alone), another fork server's socket, terminal escapes through the relayed output, and an
  honest all_reduce.
- the sixth (2 files, 2026-12-06, a fifth reviewer agent, against streamed timed calls): a wrong answer on
  the first call of each timed batch only (told by the gap before it), and an honest all_gather + float32
  sum. Its other cheat, a chain of short-lived processes hopping past the judge's stop and kill scans, is
  not kept here: outside a sandbox such chains escaped their author's test process (its runs are in
  results/heldout-set6-2026-12-06/).
All target `l1-all_reduce-sum-bw-fp16`; each file's first line says `# expect: accept`, `# expect: reject`,
`# expect: contain` (a route through the operating system to the judge's or the reference's processes or files:
rejected without the sandbox; in it, where the record's `sandbox` says namespaces held, the route reaches
nothing and a verdict of correct on the candidate's honest work is right), or `# expect: inert` (reading the
judge's messages ahead of the harness: rejected by a judge that sends a batch's inputs at once; where timed
calls are streamed, integrity_version 5 on, there is nothing ahead to read and a verdict of correct on the
candidate's honest work is right).
They are judged from a copy (one rewrites its own file), in one batch (`--solutions-dir`).
Prints one row per candidate (expected, verdict, the rule that decided) and the counts.

Some cheats cheat only when a trigger fires (calls that come back to back, an allocator that reuses an
address, a gap before a batch's first call); when it does not, they do honest work and a verdict of
correct is right for what ran. Their second line says `# trigger: conditional`, and they print
`mgbench-heldout: fired NAME` to stderr (relayed by the judge) the first time their cheat runs. This script
reads the eval's stderr for those lines and appends, as each verdict comes, whether the candidate's trigger
fired since its last verdict to a file beside the results (`<results stem>-fired.jsonl`, keyed as the
verdicts are: candidate, world size, backend, size). A conditional cheat judged correct is
counted apart, "trigger never fired", not as a missed cheat; judged correct after its trigger fired, it is a
miss. A conditional cheat judged before this file existed counts as before.

  PYTHONPATH=. python3 benchmarks/heldout_eval.py [--world-size 2] [--backend shared-gpu] [--tasks OUT] [--keep DIR]

Candidates that write side files (file_replay: /tmp/.mgb_replay_cache, shm_sidechannel:
/dev/shm/.mgb_sc_*) have them removed before the run.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mgbench.store import append_jsonl, latest_by, read_jsonl  # noqa: E402

CHEATS = ROOT / "benchmarks" / "heldout_cheats"
TASK = "l1-all_reduce-sum-bw-fp16"


FIRED = "mgbench-heldout: fired "  # a conditional cheat's line on stderr when its cheat runs
# the batch eval's line as each candidate's verdict comes (mgbench.report.Progress): "eval [i/N] FILE STATUS ...",
# searched anywhere in a line: a candidate's last output without a newline runs into it
VERDICT_LINE = re.compile(r"eval \[\d+/\d+\] (\S+\.py) ")


def _cli(*args: str) -> subprocess.CompletedProcess:
    """Run `mgbench ARGS`, its stderr captured."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "mgbench.cli", *args], env=env, text=True, capture_output=True)


def record_triggers(
    lines: Iterable[str],
    results: Path,
    fired_file: Path,
    echo: TextIO,
    merge_into: Path | None = None,
    seen: int | None = None,
) -> None:
    """Pass the eval's stderr `lines` to `echo`; as each candidate's verdict line comes, append to
    `fired_file`, for each record the eval appended to `results` for that candidate since the last verdict
    line (the eval appends a record, then prints its line), the record's key (`_verdict_key`), a digest of
    the record and whether a `FIRED` line named the candidate since its last verdict. A verdict line with no
    new record behind it (printed by a candidate, say) is passed over. `merge_into`: also append there the
    last of those records, the judge's own: the judge kills a candidate's processes before it appends the
    record, so a line the candidate forged for itself comes before it; a candidate of another eval side by
    side could still write after it, unless the evals' sandbox makes the file read-only to candidates (judge
    requires it). `seen`: the records `results` held before the eval started (default: now)."""
    fired: set[str] = set()
    if seen is None:
        seen = sum(1 for _ in read_jsonl(results))
    for line in lines:
        echo.write(line)
        echo.flush()
        if FIRED in line:  # relayed lines of two ranks may share a line: the name is the word after the marker
            fired.update(m.split()[0] for m in line.split(FIRED)[1:] if m.split())
        verdict = VERDICT_LINE.search(line)
        if not verdict:
            continue
        sample = verdict.group(1)
        records = list(read_jsonl(results))
        behind = [r for r in records[seen:] if r.get("sample") == sample]
        if not behind:
            continue
        seen = len(records)
        for r in behind:  # appended under a lock: evals side by side (--jobs) share the file
            digest = hashlib.sha256(json.dumps(r, sort_keys=True).encode()).hexdigest()[:16]
            key = dict(zip(("sample", "world_size", "backend", "size"), _verdict_key(r)))
            append_jsonl(fired_file, {**key, "verdict": digest, "fired": _stem(sample) in fired})
        if merge_into is not None:
            append_jsonl(merge_into, behind[-1])
        fired.discard(_stem(sample))  # the next world size's run says again


def _eval_watching_triggers(args: list[str], results: Path, fired_file: Path, merge_into: Path | None = None) -> int:
    """Run `mgbench eval ARGS` (writing `results`), its stderr through record_triggers to ours."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    seen = sum(1 for _ in read_jsonl(results))  # before the eval can append
    proc = subprocess.Popen(
        [sys.executable, "-m", "mgbench.cli", "eval", *args],
        env=env,
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        errors="replace",
    )
    record_triggers(proc.stderr, results, fired_file, sys.stderr, merge_into, seen)
    return proc.wait()


def shard_candidates(copies: Path, jobs: int) -> list[Path]:
    """The folders `jobs` evals judge side by side: `copies` itself for one; else `copies`-K (K < jobs) beside
    it, each with every jobs-th candidate of `copies` in name order, moved there."""
    if jobs == 1:
        return [copies]
    names = sorted(p.name for p in copies.glob("*.py"))
    shards = [copies.with_name(f"{copies.name}-{k}") for k in range(jobs)]
    for k, shard in enumerate(shards):
        shutil.rmtree(shard, ignore_errors=True)
        shard.mkdir()
        for name in names[k::jobs]:
            shutil.move(copies / name, shard / name)
    return shards


# Evals side by side need the candidate's sandbox: its read-only mounts keep a candidate of one eval from
# appending to another eval's results file after a judge's record, or to the shared one, which no eval settles.
SIDE_BY_SIDE_ARGS = ["--sandbox", "require"]


def judge(folders: list[Path], eval_args: list[str], results: Path) -> int:
    """Judge the candidates of `folders`, one batch eval per folder, side by side, into `results` (and its
    triggers file); the first failing exit code, else 0. One folder: the eval appends to `results` itself and
    settles it (validation/eval/commands.py: the file becomes what the eval found plus the records it judged,
    dropping lines forged meanwhile). Several: that settling would drop the other evals' records too, so each
    writes a results file of its own, begun as a copy of `results` (to resume), each verdict's record is
    appended to `results` as it comes, and the evals run only in the candidate's sandbox (SIDE_BY_SIDE_ARGS;
    without one they refuse and nothing is judged)."""
    if len(folders) == 1:
        return _eval_watching_triggers(
            ["--solutions-dir", str(folders[0]), "--results", str(results), *eval_args], results, fired_path(results)
        )
    codes: list[int | None] = [None] * len(folders)

    def watch(k: int) -> None:
        own = folders[k].with_name(f"{folders[k].name}-results.jsonl")
        own.unlink(missing_ok=True)
        if results.exists():
            shutil.copyfile(results, own)
        args = ["--solutions-dir", str(folders[k]), "--results", str(own), *eval_args, *SIDE_BY_SIDE_ARGS]
        try:
            codes[k] = _eval_watching_triggers(args, own, fired_path(results), merge_into=results)
        except Exception as e:  # noqa: BLE001 -- a watcher that broke is a failed eval, not a silent 0
            print(f"heldout_eval: the eval of {folders[k].name} broke: {type(e).__name__}: {e}", file=sys.stderr)

    threads = [threading.Thread(target=watch, args=(k,)) for k in range(len(folders))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return next((1 if c is None else c for c in codes if c != 0), 0)


def _stem(sample: str) -> str:
    """`l1-...@fused_deferred.py` -> `fused_deferred`, the name a candidate's FIRED line gives."""
    return sample.split("@", 1)[-1].removesuffix(".py")


def _expected(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    return next((w for w in ("accept", "contain", "inert") if w in first), "reject")


def fired_path(results: Path) -> Path:
    """The triggers file beside a results file: `<results stem>-fired.jsonl`."""
    return results.with_name(results.stem + "-fired.jsonl")


def load_triggers(results: Path) -> dict[tuple, bool]:
    """`_verdict_key` -> whether the candidate's trigger fired before that verdict, from the triggers file."""
    return {k: r["fired"] for k, r in latest_by(fired_path(results), _verdict_key).items()}


def trigger_of(rec: dict, triggers: dict[tuple, bool]) -> bool | None:
    """Whether a verdict's conditional cheat fired its trigger; None if the candidate is not conditional (or no
    longer among the held-out files) or no trigger was recorded for the verdict."""
    source = CHEATS / rec["sample"]
    return triggers.get(_verdict_key(rec)) if source.exists() and _conditional(source) else None


def _conditional(path: Path) -> bool:
    """Whether the candidate cheats only when a trigger fires (its second line says so)."""
    lines = path.read_text().splitlines()
    return len(lines) > 1 and lines[1].startswith("# trigger: conditional")


STREAMED_SINCE = 5  # the integrity_version from which timed calls are streamed (validation/eval/runner.py)


def judged_right(expect: str, rec: dict, fired: bool | None = None) -> bool | None:
    """Whether a record's verdict is the one its candidate's header expects; None for a conditional cheat
    judged correct whose trigger never fired (`fired` False: it did honest work, so correct is right, and
    the run shows nothing of whether its cheat would be caught). `fired` None: not known (not conditional,
    or judged before triggers were recorded)."""
    correct = rec["status"] == "correct"
    if expect == "reject" and correct and fired is False:
        return None
    if expect == "contain":
        return not correct or str(rec.get("sandbox") or "").startswith("namespaces")
    if expect == "inert":
        return not correct or int(rec.get("integrity_version") or 0) >= STREAMED_SINCE
    return correct == (expect == "accept")


def _rule(reason: str) -> str:
    return reason.rsplit("rule ", 1)[-1].split(")")[0] if "rule " in reason else reason[:50]


def _verdict_key(r: dict) -> tuple:
    """One candidate's verdict at one world size, backend and size: a resumed file may hold it twice (a
    retried error), and the last one counts."""
    return (r["sample"], r.get("world_size"), r.get("backend"), r.get("size"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world-size", type=int, action="append", help="repeatable (default: eval's own)")
    ap.add_argument("--keep", help="keep the work folder here")
    ap.add_argument(
        "--tasks",
        help="a generated task folder holding the target task (default: generate it; the GPU machines cannot)",
    )
    ap.add_argument("--backend", help="eval backend (default: eval's own; shared-gpu: ranks on one GPU)")
    ap.add_argument("--size", help="eval size (default: eval's own for the backend)")
    ap.add_argument(
        "--results",
        help="eval's JSONL of verdicts (default: in the work folder); a re-run with the same file judges only "
        "the candidates not in it, as a batch eval resumes",
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="evals side by side, each judging every N-th candidate into the same results (default: 1, one batch)",
    )
    args = ap.parse_args()
    if args.jobs < 1:
        ap.error(f"--jobs {args.jobs}: at least 1")
    shutil.rmtree("/tmp/.mgb_replay_cache", ignore_errors=True)
    for f in glob.glob("/dev/shm/.mgb_sc_*"):
        os.remove(f)
    work = Path(args.keep or tempfile.mkdtemp(prefix="mgb-heldout-"))
    tasks = Path(args.tasks) if args.tasks else work / "out"
    if not args.tasks:
        gen = _cli("generate", "--out", str(tasks), "--family", "all_reduce", "--replace")
        if gen.returncode:
            print(gen.stderr, file=sys.stderr)
            return 2
    # the candidates are judged from a copy: some rewrite their own file (store_self_rehash)
    copies = work / "candidates"
    shutil.rmtree(copies, ignore_errors=True)
    shutil.copytree(CHEATS, copies)
    results = Path(args.results) if args.results else work / "results.jsonl"
    ws = [a for w in args.world_size or [] for a in ("--world-size", str(w))]
    ws += [a for flag in ("backend", "size") if getattr(args, flag) for a in (f"--{flag}", getattr(args, flag))]
    before = sum(1 for _ in read_jsonl(results))
    code = judge(shard_candidates(copies, args.jobs), ["--tasks", str(tasks), *ws], results)
    if code and sum(1 for _ in read_jsonl(results)) == before:  # refused or broken: not "0 of 0 as expected"
        print(f"heldout_eval: mgbench eval judged nothing (exit {code}; its error is above)", file=sys.stderr)
        return 2
    rows = list(latest_by(results, _verdict_key).values())
    triggers = load_triggers(results)
    counts: Counter = Counter()
    print(f"{'candidate':30} {'expect':7} {'verdict':10} {'speedup':8} rule")
    for r in sorted(rows, key=lambda r: r["sample"]):
        expect = _expected(CHEATS / r["sample"])
        right = judged_right(expect, r, trigger_of(r, triggers))
        counts[right] += 1
        speed = f"{r['speedup']:.2f}" if r.get("speedup") else "-"
        mark = {True: "", False: "   <- not as expected", None: "   (trigger never fired: honest work ran)"}[right]
        print(f"{_stem(r['sample']):30} {expect:7} {r['status']:10} {speed:8} {_rule(r.get('reason') or '')}{mark}")
    unfired = f", {counts[None]} conditional cheat(s) whose trigger never fired" if counts[None] else ""
    print(f"\n{counts[True]} of {len(rows)} judged as expected{unfired} (CPU and shared-GPU speedups are not results)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
