"""Exact (normalized-AST hash) and near-duplicate (MinHash) clustering of extracted units.

Forks and vendored copies collapse into one cluster; its representative is the member with a
publishable license, then the higher-priority source (earlier in sources.yaml), then path order.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from mgbench.scrapers.minhash import candidate_pairs, similarity


def ast_hash(source: str) -> str:
    """sha256 of the AST with docstrings, comments, formatting and positions removed."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return "src-" + hashlib.sha256(" ".join(source.split()).encode()).hexdigest()[:16]
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree, annotate_fields=False).encode()).hexdigest()[:16]


@dataclass
class Member:
    key: str  # candidate id
    ast_hash: str
    minhash: Sequence[int]
    rank: tuple  # lower sorts first when picking the representative


class _UnionFind:
    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def cluster(members: list[Member], threshold: float = 0.8) -> dict[str, tuple[str, float]]:
    """key -> (representative key, similarity to it: 1.0 exact, MinHash estimate otherwise)."""
    uf = _UnionFind(len(members))
    first: dict[str, int] = {}
    for i, m in enumerate(members):
        if m.ast_hash in first:
            uf.union(first[m.ast_hash], i)
        else:
            first[m.ast_hash] = i
    reps = list(first.values())
    for a, b in candidate_pairs([members[i].minhash for i in reps]):
        ia, ib = reps[a], reps[b]
        if similarity(members[ia].minhash, members[ib].minhash) >= threshold:
            uf.union(ia, ib)
    groups: dict[int, list[int]] = {}
    for i in range(len(members)):
        groups.setdefault(uf.find(i), []).append(i)
    out: dict[str, tuple[str, float]] = {}
    for idxs in groups.values():
        rep = min(idxs, key=lambda i: members[i].rank)
        for i in idxs:
            m, r = members[i], members[rep]
            sim = 1.0 if m.ast_hash == r.ast_hash else similarity(m.minhash, r.minhash)
            out[m.key] = (r.key, round(sim, 3))
    return out
