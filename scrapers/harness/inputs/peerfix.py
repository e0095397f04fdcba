"""Ranks guessed as 0 that are the caller's own rank or a point-to-point peer.

A parameter named `rank` (or `*_rank`, `src`, `dst`) is first drawn as rank 0, which suits a broadcast
root. When the run shows the code talks to itself (gloo's "Pair is not connected" on a send to its own
rank, "destination rank should not be the same as the rank"), the rank-named integers are redrawn per
rank: the caller's own rank, the next rank (`next_*`, `dst`, `to`, `send`) or the previous one
(`prev_*`, `src`, `from`, `recv`); a `size` beside the own rank becomes the world size. An integer the
failing line passes as `src=`/`dst=` is a peer whatever its name (both: a partner, `rank^1`).
"""

from __future__ import annotations

import re
from typing import Any

from mgbench.scrapers.harness.make.specedit import _all_args, _set_arg

SELF_TALK = (
    "pair is not connected",
    "should not be the same as the rank",
    "invalid destination rank",
    "invalid source rank",
    "cannot send to self",
    "send to self",
)
OWN_RE = re.compile(
    r"^(rank|my_rank|local_rank|global_rank|cur_rank|curr_rank|current_rank|this_rank|"
    r"self_rank|group_rank|rank_id)$"
)
NEXT_RE = re.compile(r"(^|_)(next|dst|dest|destination|to|send|succ|right)(_|$)")
PREV_RE = re.compile(r"(^|_)(prev|previous|src|source|from|recv|pred|left)(_|$)")
RANKISH_RE = re.compile(r"rank|^(src|dst|peer)$|_(src|dst|peer)$")
SIZE_RE = re.compile(r"^(size|group_size|world|nranks|num_ranks)$")
OWN, NEXT, PREV, PAIR = "rank", "(rank+1)%ws", "(rank+ws-1)%ws", "rank^1"


def peer_expr(name: str) -> str | None:
    """The per-rank expression for a rank-named integer, or None when the name is not a rank."""
    low = name.lower().lstrip("_")
    if OWN_RE.match(low):
        return OWN
    if not RANKISH_RE.search(low):
        return None
    if NEXT_RE.search(low):
        return NEXT
    if PREV_RE.search(low):
        return PREV
    return NEXT if "peer" in low else None


def _line_peers(line: str) -> dict[str, str]:
    """Names the failing line passes as a peer: `dst=x`/`peer=x` -> next, `src=x` -> previous, both -> partner."""
    out: dict[str, str] = {}
    for kw, name in re.findall(r"\b(src|dst|peer|dest)\s*=\s*(\w+)\b", line):
        e = PREV if kw == "src" else NEXT
        out[name] = PAIR if out.get(name, e) != e else e
    return out


def peer_fixes(spec: dict[str, Any], low: str, line: str = "") -> list[dict[str, Any]]:
    """After an error showing a rank talking to itself: the rank-named integers redrawn per rank (with
    and without a `size` beside the own rank taken as the world size)."""
    if not any(w in low for w in SELF_TALK):
        return []
    ints = [a for a in _all_args(spec) if a["kind"] == "int"]
    on_line = _line_peers(line)
    out, s = [], spec
    for a in ints:
        e = on_line.get(a["name"]) or peer_expr(a["name"])
        if e and a.get("expr") != e:
            s = _set_arg(s, a["name"], {**a, "expr": e})
    if s is spec:
        return []
    out.append(s)
    if any(peer_expr(a["name"]) == OWN for a in ints):
        sized = s
        for a in ints:
            if SIZE_RE.match(a["name"].lower()) and a.get("expr") != "ws":
                sized = _set_arg(sized, a["name"], {**a, "expr": "ws"})
        if sized is not s:
            out.insert(0, sized)
    return out
