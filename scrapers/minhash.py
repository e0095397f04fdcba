"""MinHash signatures over token shingles, and LSH banding to find near-duplicate pairs."""

from __future__ import annotations

import builtins
import hashlib
import io
import keyword
import re
import tokenize
from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

PRIME = (1 << 31) - 1
NUM_PERM = 128
SHINGLE = 5
_rng = np.random.default_rng(20240607)
_A = _rng.integers(1, PRIME, NUM_PERM, dtype=np.uint64)
_B = _rng.integers(0, PRIME, NUM_PERM, dtype=np.uint64)
_SKIP = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}
_FALLBACK = re.compile(r"\w+|[^\w\s]")
_BUILTINS = frozenset(dir(builtins))


def code_tokens(source: str, rename: bool = True) -> list[str]:
    """Python tokens without comments and layout (regex split when tokenizing fails).

    With `rename`, identifiers that are not attribute names, keywords or builtins are replaced by
    their order of first appearance (alpha-renaming), so consistently renamed copies (type-2
    clones) shingle alike while the APIs they call (`.all_reduce`, `.matmul`) still tell apart."""
    try:
        toks = [
            (t.type, t.string) for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type not in _SKIP
        ]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return _FALLBACK.findall(source)
    if not rename:
        return [s for _, s in toks]
    names: dict[str, str] = {}
    out = []
    prev = ""
    for typ, s in toks:
        if typ == tokenize.NAME and prev != "." and not keyword.iskeyword(s) and s not in _BUILTINS:
            s = names.setdefault(s, f"v{len(names)}")
        out.append(s)
        prev = s
    return out


def shingles(tokens: Sequence[str], k: int = SHINGLE) -> set[str]:
    if len(tokens) < k:
        return {"\x1f".join(tokens)} if tokens else set()
    return {"\x1f".join(tokens[i : i + k]) for i in range(len(tokens) - k + 1)}


def signature(items: Iterable[str]) -> list[int]:
    """MinHash signature (NUM_PERM ints) of a set of strings; all PRIME for the empty set."""
    hashes = np.fromiter(
        (int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "little") % PRIME for s in set(items)),
        dtype=np.uint64,
    )
    if hashes.size == 0:
        return [PRIME] * NUM_PERM
    perm = (_A[:, None] * hashes[None, :] + _B[:, None]) % np.uint64(PRIME)
    return [int(v) for v in perm.min(axis=1)]


def source_signature(source: str) -> list[int]:
    return signature(shingles(code_tokens(source)))


def similarity(a: Sequence[int], b: Sequence[int]) -> float:
    """Estimated Jaccard similarity of the sets behind two signatures."""
    if not a or len(a) != len(b):
        return 0.0
    return sum(1 for x, y in zip(a, b) if x == y) / len(a)


def jaccard(a: set[str], b: set[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def candidate_pairs(sigs: Sequence[Sequence[int]], bands: int = 32) -> set[tuple[int, int]]:
    """Index pairs sharing at least one LSH band (rows = NUM_PERM / bands)."""
    rows = NUM_PERM // bands
    pairs: set[tuple[int, int]] = set()
    for b in range(bands):
        buckets: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for i, sig in enumerate(sigs):
            if len(sig) == NUM_PERM:
                buckets[tuple(sig[b * rows : (b + 1) * rows])].append(i)
        for members in buckets.values():
            if 1 < len(members) <= 200:
                for x in range(len(members)):
                    for y in range(x + 1, len(members)):
                        pairs.add((members[x], members[y]))
    return pairs
