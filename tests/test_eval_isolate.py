"""The judge's hold on the candidate's processes (validation/eval/judge/isolate.py): what counts as a stray of
the candidate's, which scheduling changes of the reference are seen; and a results file rewrite that no planted
link redirects (mgbench/store.py)."""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time

import pytest

from mgbench.validation.eval.judge import isolate

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc, prctl and the fork server are Linux's")


def test_a_fork_server_child_the_judge_did_not_start_is_a_stray_and_is_killed():
    """The fork server forks for any process of this user that reaches its socket: a child of it that is no
    rank of the judge's pools is the candidate's, stopped and killed with it; an allowed one (a rank) is not."""
    ctx = mp.get_context("forkserver")
    before = ctx.Process(target=time.sleep, args=(60,))  # exists before the evaluation: another pool's
    before.start()
    containment = isolate.Containment()
    rank, stray = ctx.Process(target=time.sleep, args=(60,)), ctx.Process(target=time.sleep, args=(60,))
    rank.start()
    stray.start()
    containment.allow([rank.pid])
    try:
        strays = containment.strays()
        assert stray.pid in strays and rank.pid not in strays and before.pid not in strays
        containment.end()
        stray.join(10)
        assert stray.exitcode == -9
        assert rank.is_alive() and before.is_alive()
    finally:
        for p in (before, rank, stray):
            p.kill()
            p.join(10)


def test_affinity_and_nice_changes_of_a_watched_thread_are_reported():
    kid = mp.get_context("fork").Process(target=time.sleep, args=(60,))
    kid.start()
    try:
        before = isolate.sched_state([kid.pid])
        os.setpriority(os.PRIO_PROCESS, kid.pid, 10)
        os.sched_setaffinity(kid.pid, {min(os.sched_getaffinity(0))})
        moved = isolate.changed(before, isolate.sched_state([kid.pid]))
        assert moved and "nice 0 -> 10" in moved[0]
        if len(os.sched_getaffinity(0)) > 1:
            assert "cpus" in moved[0]
        assert isolate.changed(before, before) == []
    finally:
        kid.kill()
        kid.join(10)


def test_a_results_rewrite_follows_no_link_planted_at_a_temporary_name(tmp_path):
    """The rewrite of a results file writes a fresh, exclusively created file: a symlink a candidate planted
    where a fixed temporary name would be is neither written through nor moved onto the results file."""
    from mgbench.store import read_jsonl, rewrite_jsonl

    results, target = tmp_path / "r.jsonl", tmp_path / "elsewhere"
    results.write_text('{"a": 1}\n')
    target.write_text("untouched\n")
    (tmp_path / "r.jsonl.tmp").symlink_to(target)
    rewrite_jsonl(results, [{"a": 2}])
    assert not results.is_symlink() and list(read_jsonl(results)) == [{"a": 2}]
    assert target.read_text() == "untouched\n"
