"""Streamed jobs of a RankPool (validation/pool.py, RankContext.exchange): a rank gets its next message
only after it sent its step, so nothing in the rank can read ahead (the judge's timed calls rely on it)."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.validation.eval.judge import wire
from mgbench.validation.jobs import EchoStreamJob
from mgbench.validation.pool import RankPool, collect_replies, is_step


@pytest.fixture(scope="module")
def pool():
    with RankPool(2, "gloo", startup_timeout_s=120) as p:
        yield p


def test_each_message_reaches_the_rank_only_after_its_step(pool):
    feeds = [[pickle.dumps(b"x" * n) for n in (3, 5, 7)], [pickle.dumps(b"y" * n) for n in (11,)]]
    oc = pool.run([EchoStreamJob(first=b"ab"), EchoStreamJob(first=b"")], 30, feeds=feeds)
    assert oc.status == "ok", oc.reason
    assert [r["result"]["steps"] for r in oc.results] == [4, 2]  # one step per message, the end included
    assert [s["size"] for s in oc.steps[0]] == [2, 3, 5, 7] and [s["size"] for s in oc.steps[1]] == [0, 11]
    # the next message was never waiting in the pipe when a step was sent: the pool sends it after
    assert not any(s["early"] for steps in oc.steps for s in steps)


@settings(max_examples=8, deadline=None)
@given(st.lists(st.lists(st.integers(0, 64), max_size=6), min_size=2, max_size=2))
def test_a_rank_takes_as_many_steps_as_its_feed_has_messages(pool, sizes):
    feeds = [[pickle.dumps(b"z" * n) for n in per_rank] for per_rank in sizes]
    oc = pool.run(EchoStreamJob(first=b""), 30, feeds=feeds)
    assert oc.status == "ok", oc.reason
    assert [len(s) for s in oc.steps] == [len(f) + 1 for f in sizes]
    assert [[s["size"] for s in steps[1:]] for steps in oc.steps] == sizes


def test_a_plain_job_after_a_streamed_one_sees_no_leftover(pool):
    pool.run(EchoStreamJob(first=b""), 30, feeds=[[pickle.dumps(b"q")], []])
    oc = pool.run(EchoStreamJob(first=b""), 30)  # no feeds: the pool answers every step with the end
    assert oc.status == "ok" and [r["result"]["steps"] for r in oc.results] == [1, 1]


class _Pipe:
    """One rank's end as collect_replies reads it: the queued raw messages, and what was sent back."""

    def __init__(self, raws):
        self.raws, self.sent = list(raws), []

    def recv_bytes(self):
        return self.raws.pop(0)


class _Alive:
    exitcode = None

    def join(self, timeout=None):
        pass


def test_a_step_that_does_not_decode_ends_the_rank_as_an_error(monkeypatch):
    """A candidate's bytes are decoded as plain data (wire.safe_loads): a pickle naming a global is a
    protocol error of that rank, not a step and not code run in the judge."""
    evil = pickle.dumps({"step": True, "x": print})
    conn = _Pipe([evil])
    monkeypatch.setattr("mgbench.validation.pool.wait", lambda conns, timeout: [c for c in conns if c.raws])
    steps = []
    replies, status, _ = collect_replies(
        [conn], [_Alive()], 1e18, 0.1, loads=wire.safe_loads, on_step=lambda r, m: steps.append(m)
    )
    assert steps == [] and replies[0]["ok"] is False and "ProtocolError" in replies[0]["error"]


def test_a_step_is_a_dict_with_the_step_key_and_no_ok():
    assert is_step({"step": True, "call": 0})
    assert not is_step({"step": True, "ok": True}) and not is_step(["step"]) and not is_step({"ok": False})
