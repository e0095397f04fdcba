"""Which problems of a peer benchmark (taxonomy/peers/<id>.yaml) our families match in full.

A family claims a problem with `peers: {<peer>: [N, ...]}` (all its variants) or a variant with the
same key (that variant only). The claims are the contributor's; an independent audit checks them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mgbench.taxonomy.model import Taxonomy, TaxonomyError


@dataclass
class PeerRow:
    """One problem of the peer and the families (or family/variant) claiming a full match."""

    n: int
    name: str
    matched_by: list[str] = field(default_factory=list)


def peer_rows(tax: Taxonomy, peer_id: str) -> list[PeerRow]:
    """Every problem of `peer_id` in number order, with the families/variants claiming it."""
    if peer_id not in tax.peers:
        raise TaxonomyError(f"unknown peer {peer_id!r} (known: {', '.join(sorted(tax.peers)) or 'none'})")
    rows = {n: PeerRow(n, name) for n, name in sorted(tax.peers[peer_id].problems.items())}
    for fam in sorted(tax.families.values(), key=lambda f: f.id):
        for n in fam.peers.get(peer_id, []):
            rows[n].matched_by.append(fam.id)
        for var in fam.variants:
            for n in var.peers.get(peer_id, []):
                rows[n].matched_by.append(f"{fam.id}/{var.id}")
    return list(rows.values())


def summary(rows: list[PeerRow]) -> str:
    """'N of M problems matched in full by a family; unmatched: ...'."""
    missing = [str(r.n) for r in rows if not r.matched_by]
    return (
        f"{len(rows) - len(missing)} of {len(rows)} problems matched in full by a family or variant; "
        f"unmatched: {', '.join(missing) or 'none'}"
    )
