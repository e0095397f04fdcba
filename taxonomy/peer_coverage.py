"""Which problems of a peer benchmark (taxonomy/peers/<id>.yaml) our families claim, and what an
independent audit found.

A family claims a problem with `peers: {<peer>: [N, ...]}` (all its variants) or a variant with the
same key (that variant only). The claims are the contributor's; an independent audit checks them and
its verdict per problem lives in the peer file (`audit: full|partial|none`, `differs`), dated by the
file's `audited` line. Only the audit says "full".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mgbench.taxonomy.model import Taxonomy, TaxonomyError


@dataclass
class PeerRow:
    """One problem of the peer, the families (or family/variant) claiming it and the audit's verdict."""

    n: int
    name: str
    matched_by: list[str] = field(default_factory=list)
    verdict: str = ""  # the audit's: full, partial, none ("" where not audited)
    differs: str = ""


def peer_rows(tax: Taxonomy, peer_id: str) -> list[PeerRow]:
    """Every problem of `peer_id` in number order, with the families/variants claiming it."""
    if peer_id not in tax.peers:
        raise TaxonomyError(f"unknown peer {peer_id!r} (known: {', '.join(sorted(tax.peers)) or 'none'})")
    peer = tax.peers[peer_id]
    rows = {n: PeerRow(n, name) for n, name in sorted(peer.problems.items())}
    for n, audit in peer.audit.items():
        rows[n].verdict, rows[n].differs = audit.verdict, audit.differs
    for fam in sorted(tax.families.values(), key=lambda f: f.id):
        for n in fam.peers.get(peer_id, []):
            rows[n].matched_by.append(fam.id)
        for var in fam.variants:
            for n in var.peers.get(peer_id, []):
                rows[n].matched_by.append(f"{fam.id}/{var.id}")
    return list(rows.values())


def summary(rows: list[PeerRow]) -> str:
    """'N of M problems claimed by a family or variant; strict audit: F full, P partial, X none' (the audit's
    date and method are the peer file's `audited` line)."""
    missing = [str(r.n) for r in rows if not r.matched_by]
    text = f"{len(rows) - len(missing)} of {len(rows)} problems claimed by a family or variant; unclaimed: "
    text += ", ".join(missing) or "none"
    verdicts = [r.verdict for r in rows if r.verdict]
    if verdicts:
        counts = ", ".join(f"{verdicts.count(v)} {v}" for v in ("full", "partial", "none"))
        unaudited = len(rows) - len(verdicts)
        text += f"; strict audit: {counts}"
        text += f", {unaudited} not audited" if unaudited else ""
    return text
