"""File everything one lent-machine call of the shared-GPU pass brought back into a results folder, in one
command, so the next call (which resumes from results/cuda-shared-*/) never checks an item again.

    python3 benchmarks/file_call.py CALL_DIR results/cuda-shared-TAG [--tag call3]

CALL_DIR is where the call's $OUT files came back (searched recursively). Each file is filed by its name
(FILING): the records phases of benchmarks/cuda_shared_pass.sh through cuda_correctness_pass.file_into
(passes and failures apart, as `mgbench publish` reads them); heldout.jsonl and heldout-fired.jsonl (which
conditional held-out cheats' triggers fired) appended to the folder's files of those names; suites.jsonl to
suites/<tag>.jsonl (apart: the records' glob reads every *.jsonl of the folder); call.log to logs/<tag>.log.
Other files are named and left alone. A file already filed (same
bytes, in the ledger logs/filed.jsonl, out of the records' glob) is not filed twice, so running the command
again is harmless.
Exits 1 if a file could not be filed (its line says why); what was filed before it stays filed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("cuda_correctness_pass", HERE / "cuda_correctness_pass.py")
cuda_pass = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cuda_pass)

RECORD_PHASES = ("ws2", "big", "l4", "ws4", "ws8")


def _records(src: Path, folder: Path, tag: str) -> str:
    for i, row in enumerate(cuda_pass.read_jsonl(src), 1):  # refused whole, before anything is appended
        missing = [k for k in ("task_id", "world_size", "status") if k not in row]
        if missing:
            raise ValueError(f"line {i} is no validation record (no {', '.join(missing)})")
    return cuda_pass.file_into(src, folder)


def _append(name: str) -> Callable[[Path, Path, str], str]:
    def append(src: Path, folder: Path, tag: str) -> str:
        lines = [line for line in src.read_text().splitlines() if line.strip()]
        for line in lines:
            json.loads(line)  # a cut line is refused before anything is appended
        dest = folder / name
        # a call seeded with the folder's lines (HELDOUT_SEED, to resume) returns them too: appended once
        have = set(dest.read_text().splitlines()) if dest.exists() else set()
        new = [line for line in lines if line not in have]
        with open(dest, "a") as f:
            f.write("".join(line + "\n" for line in new))
        seen = f" ({len(lines) - len(new)} already there)" if len(new) < len(lines) else ""
        return f"{src} -> {dest}: {len(new)} line(s) appended{seen}"

    return append


def _copy(sub: str, suffix: str) -> Callable[[Path, Path, str], str]:
    def copy(src: Path, folder: Path, tag: str) -> str:
        dest = folder / sub / f"{tag}{suffix}"
        if dest.exists():
            raise FileExistsError(f"{dest} exists (give another --tag)")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        return f"{src} -> {dest}"

    return copy


# a call's file name -> how it is filed
FILING: dict[str, Callable[[Path, Path, str], str]] = {
    **{f"{phase}.jsonl": _records for phase in RECORD_PHASES},
    "heldout.jsonl": _append("heldout.jsonl"),
    "heldout-fired.jsonl": _append("heldout-fired.jsonl"),
    "suites.jsonl": _copy("suites", ".jsonl"),
    "call.log": _copy("logs", ".log"),
}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def file_call(call_dir: Path, folder: Path, tag: str) -> tuple[list[str], bool]:
    """File call_dir's files into folder; the lines to print and whether every known file was filed."""
    folder.mkdir(parents=True, exist_ok=True)
    ledger = folder / "logs" / "filed.jsonl"  # not in the folder: its *.jsonl are read as records
    done = {rec["sha256"] for rec in cuda_pass.read_jsonl(ledger)}
    lines, ok = [], True
    for src in sorted(p for p in call_dir.rglob("*") if p.is_file()):
        how = FILING.get(src.name)
        if how is None:
            lines.append(f"{src}: not filed (no filing rule for {src.name!r})")
            continue
        digest = _digest(src)
        if digest in done:
            lines.append(f"{src}: already filed")
            continue
        try:
            lines.append(how(src, folder, tag))
        except (OSError, ValueError, KeyError) as e:
            lines.append(f"{src}: not filed: {type(e).__name__}: {e}")
            ok = False
            continue
        cuda_pass.append_jsonl(ledger, {"sha256": digest, "file": src.name, "tag": tag})
        done.add(digest)
    return lines, ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("call_dir", type=Path, help="where the call's files came back")
    p.add_argument("folder", type=Path, help="results/cuda-shared-<tag>/")
    p.add_argument("--tag", help="name of this call's log and suites files (default: CALL_DIR's name)")
    args = p.parse_args(argv)
    if not args.call_dir.is_dir():
        print(f"file_call: {args.call_dir}: not a folder", file=sys.stderr)
        return 2
    lines, ok = file_call(args.call_dir, args.folder, args.tag or f"call-{args.call_dir.resolve().name}")
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
