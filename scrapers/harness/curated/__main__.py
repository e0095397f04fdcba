"""`python -m mgbench.scrapers.harness.curated [--entries DIR] [--scrape SCRAPE]`: check the registry and list it.

Exit 0 when every file loads, 1 with one line naming the file, entry and reason when one does not. With
`--scrape`, also how many of SCRAPE's candidates each entry matches (an entry matching none is listed)."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from mgbench.scrapers.harness.curated.registry import CONFIGS, ENTRIES, RegistryError, load


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mgbench.scrapers.harness.curated", description=__doc__.splitlines()[0])
    p.add_argument("--entries", default=str(ENTRIES), help="folder of <owner>+<name>.yaml files")
    p.add_argument("--configs", default=str(CONFIGS))
    p.add_argument("--scrape", help="a scrape folder: count the candidates each entry matches")
    args = p.parse_args(argv)
    try:
        reg = load(Path(args.entries), Path(args.configs))
    except RegistryError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    hits: Counter = Counter()
    if args.scrape:
        with (Path(args.scrape) / "candidates.jsonl").open() as f:
            for line in f:
                c = json.loads(line)
                if c.get("unique") and c.get("license_permitted"):
                    e = reg.match(c)
                    if e is not None:
                        hits[e.id] += 1
    print("| repository | qualname | path | verdict | config | full_n | args | matched |")
    print("|---|---|---|---|---|---|---|---|")
    for e in reg.entries:
        matched = str(hits[e.id]) if args.scrape else ""
        print(
            f"| {e.repo} | {e.qualname} | {e.path} | {e.verdict} | {e.config} | {e.full_n or ''} | "
            f"{len(e.args) + len(e.attrs)} | {matched} |"
        )
    v = Counter(e.verdict for e in reg.entries)
    print(f"\n{len(reg.entries)} entries ({v['ship']} ship, {v['skip']} skip), {len(reg.configs)} configurations")
    unmatched = [e.id for e in reg.entries if args.scrape and not hits[e.id]]
    if unmatched:
        print(f"matching no candidate of {args.scrape}: {', '.join(unmatched)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
