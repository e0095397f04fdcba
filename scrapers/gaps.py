"""`mgbench scrape gaps`: clusters of mined candidates that no task family covers yet.

A candidate is covered when some family of the current taxonomy has its workload, communicates with
realizations the candidate uses, and shares one of its parallelism dims. Two exceptions: a candidate
without parallelism words (dim `collective`) is covered by any family of its workload and
realizations, and a level-1 primitive (a family without a plan) covers its collective in any dim.
Uncovered candidates are grouped by their pattern signature (first dim, workload, realizations), and
the groups are ranked by how many repositories show the pattern, then by how many library (not
test, example or benchmark) candidates it has: the top rows are the real patterns the taxonomy lacks.
The families are re-read at report time, so a family added since the scrape counts as coverage.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mgbench.scrapers.classify import SAME_PATTERN_REALIZATION, TaxonomyIds, load_ids, words

# generic words that say nothing about the pattern in a cluster's name summary
_STOP_WORDS = {
    "self",
    "forward",
    "backward",
    "fn",
    "func",
    "def",
    "get",
    "set",
    "init",
    "run",
    "call",
    "test",
    "tests",
    "impl",
    "main",
    "the",
    "and",
    "with",
    "for",
    "to",
    "from",
}


@dataclass
class GapCluster:
    """Uncovered candidates sharing one pattern signature."""

    dim: str
    workload: str
    realizations: list[str]
    candidates: int = 0
    library: int = 0
    repos: list[str] = field(default_factory=list)
    name_words: list[str] = field(default_factory=list)  # most frequent words of the unit names
    examples: list[str] = field(default_factory=list)  # repo:path:qualname, library code first

    @property
    def signature(self) -> str:
        return f"{self.dim} x {self.workload} via {'+'.join(self.realizations) or '(none)'}"


def _norm(reals: Iterable[str]) -> set[str]:
    return {SAME_PATTERN_REALIZATION.get(r, r) for r in reals}


def covering_families(dims: list[str], workload: str, reals: list[str], tax: TaxonomyIds) -> list[str]:
    """Families of `tax` that cover a unit with these labels (see the module docstring)."""
    have, dimset = _norm(reals), set(dims) - {"collective"}
    out = []
    for fam in tax.families:
        need = _norm(fam["realization"])
        if fam["workload"] != workload or not need or not need <= have:
            continue
        if dimset and fam["dims"] and not dimset & set(fam["dims"]):
            continue
        out.append(fam["id"])
    return out


def _labels(cand: dict[str, Any]) -> tuple[list[str], str, list[str]] | None:
    cl = cand.get("classification")
    if not (cl and cand.get("unique") and cand.get("license_permitted") and cl.get("realizations")):
        return None
    return (
        [d["id"] for d in cl["dims"]] or ["collective"],
        cl["workload"]["id"],
        sorted({r["id"] for r in cl["realizations"]}),
    )


def gap_clusters(candidates: Iterable[dict[str, Any]], tax: TaxonomyIds) -> tuple[list[GapCluster], int, int]:
    """(uncovered clusters ranked, candidates considered, candidates covered)."""
    clusters: dict[tuple, GapCluster] = {}
    names: dict[tuple, Counter] = {}
    examples: dict[tuple, tuple[list[str], list[str]]] = {}  # (library, other) places
    considered = covered = 0
    for cand in candidates:
        labels = _labels(cand)
        if labels is None:
            continue
        considered += 1
        dims, workload, reals = labels
        if covering_families(dims, workload, reals, tax):
            covered += 1
            continue
        key = (dims[0], workload, tuple(sorted(_norm(reals))))
        cl = clusters.setdefault(key, GapCluster(key[0], workload, list(key[2])))
        prov = cand.get("provenance", {})
        repo, library = prov.get("repo", "?"), cand.get("role", "library") == "library"
        cl.candidates += 1
        cl.library += library
        if repo not in cl.repos:
            cl.repos.append(repo)
        where = f"{repo}:{prov.get('path', '?')}:{cand.get('qualname', '?')}"
        examples.setdefault(key, ([], []))[0 if library else 1].append(where if library else f"~{where}")
        names.setdefault(key, Counter()).update(
            w
            for w in set(words(str(cand.get("qualname", "")).split(".")[-1])[1:])
            if w not in _STOP_WORDS and len(w) > 2 and "_" not in w
        )
    for key, cl in clusters.items():
        cl.name_words = [w for w, _ in names[key].most_common(5)]
        cl.examples = (examples[key][0] + examples[key][1])[:3]  # ~ marks test/example/benchmark code
    ranked = sorted(clusters.values(), key=lambda c: (-len(c.repos), -c.library, -c.candidates, c.signature))
    return ranked, considered, covered


def read_candidates(out: Path) -> list[dict[str, Any]]:
    path = out / "candidates.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no scrape results here (run `mgbench scrape local|github` first)")
    rows = []
    with path.open() as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{n}: not a JSON line ({e.msg})") from None
    return rows


def render_gaps(clusters: list[GapCluster], considered: int, covered: int, top: int) -> str:
    from mgbench.report import table

    head = (
        f"{considered} unique, permitted, classified candidates; {covered} covered by a family, "
        f"{considered - covered} in {len(clusters)} uncovered patterns (ranked by repositories, then "
        f"library candidates; ~ marks test/example code):"
    )
    rows = [
        [
            i + 1,
            c.signature,
            len(c.repos),
            c.library,
            c.candidates,
            ", ".join(c.name_words),
            c.examples[0] if c.examples else "",
        ]
        for i, c in enumerate(clusters[:top])
    ]
    return head + "\n" + table(rows, ["#", "pattern", "repos", "library", "cands", "name words", "example"])


def gaps_report(out: Path, top: int = 25, json_path: Path | None = None) -> str:
    """The text of `mgbench scrape gaps`; the full ranking as JSON when `json_path` is given."""
    clusters, considered, covered = gap_clusters(read_candidates(out), load_ids())
    if json_path:
        json_path.write_text(
            json.dumps(
                {
                    "considered": considered,
                    "covered": covered,
                    "clusters": [{**asdict(c), "signature": c.signature} for c in clusters],
                },
                indent=1,
            )
        )
    return render_gaps(clusters, considered, covered, top)
