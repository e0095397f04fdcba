"""Peer ranks (scrapers/harness/inputs/peerfix.py): own/next/previous/pair rank expressions and the fixes for ranks
that talk to themselves."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mgbench.scrapers.harness.inputs.peerfix import NEXT, OWN, PAIR, PREV, peer_expr, peer_fixes
from mgbench.scrapers.harness.make.runtime import _mg_eval
from tests.harness.helpers import _t

PAIR_ERR = "[enforce fail at pair.cc:801] state_ >= CONNECTED. 1 vs 4. Pair is not connected ([127.0.0.1]:1)"


def _int(name: str, expr: str = "0") -> dict:
    return {"name": name, "kind": "int", "expr": expr}


def test_rank_names_map_to_own_rank_next_and_previous_peers():
    assert peer_expr("rank") == OWN and peer_expr("my_rank") == OWN and peer_expr("group_rank") == OWN
    assert peer_expr("next_pipeline_rank") == NEXT and peer_expr("dst_rank") == NEXT and peer_expr("dst") == NEXT
    assert peer_expr("prev_rank") == PREV and peer_expr("src") == PREV and peer_expr("recv_rank") == PREV
    assert peer_expr("hidden_size") is None and peer_expr("ranking_dim") is None and peer_expr("root") is None


@given(ws=st.integers(2, 16), rank=st.integers(0, 15))
def test_peer_expressions_name_another_valid_rank(ws, rank):
    """Next and previous are valid ranks other than the caller's and are inverse to each other; a partner
    is an involution (a pair exchanges with each other)."""
    rank %= ws
    nxt, prv = _mg_eval(NEXT, 8, ws, rank), _mg_eval(PREV, 8, ws, rank)
    assert 0 <= nxt < ws and 0 <= prv < ws and nxt != rank and prv != rank
    assert _mg_eval(PREV, 8, ws, nxt) == rank and _mg_eval(OWN, 8, ws, rank) == rank
    if ws % 2 == 0:
        p = _mg_eval(PAIR, 8, ws, rank)
        assert p != rank and _mg_eval(PAIR, 8, ws, p) == rank


def test_peer_fixes_need_a_self_talk_error_and_use_the_failing_line():
    spec = {
        "args": [_t("buf"), _int("rank"), _int("size", "n"), _int("comm_rank"), _int("root")],
        "attrs": [],
        "globals": [],
    }
    assert peer_fixes(spec, "shape mismatch") == []
    got = peer_fixes(spec, PAIR_ERR.lower(), "dist.recv(buf, src=comm_rank); dist.send(buf, dst=comm_rank)")
    exprs = [{a["name"]: a["expr"] for a in s["args"] if a["kind"] == "int"} for s in got]
    assert exprs[0] == {"rank": OWN, "size": "ws", "comm_rank": PAIR, "root": "0"}  # size beside the own rank
    assert exprs[1] == {"rank": OWN, "size": "n", "comm_rank": PAIR, "root": "0"}
    assert peer_fixes(spec, PAIR_ERR.lower(), "") and all(
        a["expr"] == "0"
        for s in peer_fixes(spec, PAIR_ERR.lower(), "")
        for a in s["args"]
        if a["name"] in ("comm_rank", "root")
    )
