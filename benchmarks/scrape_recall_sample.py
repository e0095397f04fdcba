"""Worksheet for hand-checking extraction recall and precision on a sample of real files.

Samples N files per checkout (seeded) among those where a communication-op word is followed by
'(' (a deliberately broad grep: torch.gather, functools.reduce and repo wrappers match too), then
lists every grep hit line next to what the extractor reported for that line. A person marks each
hit: a torch.distributed communication call site (c10d / functional / autograd / ProcessGroup
method / torch.ops / deepspeed.comm facade) or not; recall = found true sites / true sites,
precision = true sites among reported / reported. Extractor sites on lines grep missed are listed
too (multi-line calls, references).

  PYTHONPATH=. python3 benchmarks/scrape_recall_sample.py /tmp/src/Megatron-LM /tmp/src/DeepSpeed \\
      --per-repo 10 --seed 7 > worksheet.tsv
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mgbench.scrapers.extract import ExtractConfig, extract_source  # noqa: E402
from mgbench.scrapers.ops import _OP_WORDS  # noqa: E402
from mgbench.scrapers.tree import walk  # noqa: E402

HIT = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in _OP_WORDS) + r")\b\s*[(,)\]]")


def sample(root: Path, n: int, rng: random.Random) -> list[Path]:
    files = []
    for f in walk(root, with_kernels=False):
        if getattr(f, "kind", None) == "py":
            try:
                text = Path(f.path).read_text(errors="replace")
            except OSError:
                continue
            if HIT.search(text):
                files.append(Path(f.path))
    files.sort()
    return rng.sample(files, min(n, len(files)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("roots", nargs="+")
    ap.add_argument("--per-repo", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    cfg = ExtractConfig(facades={"deepspeed.comm": "torch.distributed"})
    print("repo\tpath\tline\ttool\tgrep\ttext")
    for root in map(Path, args.roots):
        for p in sample(root, args.per_repo, rng):
            rel = p.relative_to(root).as_posix()
            data = p.read_bytes()
            res = extract_source(data, rel, cfg)
            tool: dict[int, list[str]] = {}
            for u in res.units:
                for c in u.calls:
                    tool.setdefault(c.line, []).append(f"{c.op}:{c.certainty}:{c.kind}")
            for ln in res.module_call_lines:
                tool.setdefault(ln, []).append("module-level")
            lines = data.decode("utf-8", errors="replace").splitlines()
            grep = {i + 1 for i, t in enumerate(lines) if HIT.search(t)}
            for ln in sorted(grep | set(tool)):
                text = lines[ln - 1].strip()[:140] if 0 < ln <= len(lines) else ""
                print(
                    f"{root.name}\t{rel}\t{ln}\t{','.join(tool.get(ln, [])) or '-'}\t"
                    f"{'hit' if ln in grep else '-'}\t{text}"
                )
            print(f"{root.name}\t{rel}\t0\tstatus={res.status}\t-\t")
    return 0


if __name__ == "__main__":
    sys.exit(main())
