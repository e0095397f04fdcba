"""A job that fails on some ranks (validation/worker.py, validation/pool.py): its error reaches the pool while
the other ranks still wait inside the job, and the pool is restarted only where ranks were left apart."""

from __future__ import annotations

from probe_jobs import FailOnRankProbe

from mgbench.validation.jobs import PingJob
from mgbench.validation.pool import RankPool

TIMEOUT_S = 60.0


def test_an_error_on_one_rank_is_reported_without_waiting_for_the_timeout():
    """Rank 1 runs out of memory while rank 0 waits in an all-reduce: rank 1 must not enter the pool's
    sequence check (a collective rank 0 never joins: a hang until the timeout, or gloo's size abort)."""
    with RankPool(2, "gloo", extra_handlers=["fail_on_rank_jobs"]) as pool:
        oc = pool.run(FailOnRankProbe(fail_rank=1), TIMEOUT_S)
        assert oc.status == "error" and "rank 1: MemoryError: rank 1 ran out of memory" in oc.reason, oc.reason
        assert oc.seconds < TIMEOUT_S / 2, oc.seconds
        assert pool.restarts == 1  # rank 0 was left inside the job
        assert pool.run(PingJob(), TIMEOUT_S).results[0]["result"]["sum"] == 1


def test_an_error_on_every_rank_keeps_the_pool():
    """Every rank failed at the same job: they are in step, the sequence check runs, the pool goes on."""
    with RankPool(2, "gloo", extra_handlers=["fail_on_rank_jobs"]) as pool:
        oc = pool.run(FailOnRankProbe(fail_rank=-1), TIMEOUT_S)
        assert oc.status == "error" and "MemoryError" in oc.reason, oc.reason
        assert pool.restarts == 0 and all(r["in_sync"] for r in oc.results)
        assert pool.run(PingJob(), TIMEOUT_S).status == "ok"


class _Conn:
    """A pipe end whose first send fails as pickling a large reply does in a rank with a capped address space."""

    def __init__(self) -> None:
        self.sent: list = []

    def send(self, obj) -> None:
        if not self.sent and obj.get("result") is not None:
            self.sent.append("refused")
            raise MemoryError
        self.sent.append(obj)


def test_a_reply_that_cannot_be_pickled_reaches_the_pool_as_an_error():
    from mgbench.validation.worker import send_reply

    conn = _Conn()
    send_reply(conn, {"ok": True, "in_sync": True, "result": b"x" * 10})
    assert conn.sent[0] == "refused"
    assert conn.sent[1]["ok"] is False and conn.sent[1]["in_sync"] is False
    assert conn.sent[1]["error"].startswith("MemoryError")
