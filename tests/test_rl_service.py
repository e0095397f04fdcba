"""The reward service (mgbench.rl.service) on gloo at smoke size, world size 2: a batch of completions judged
by `mgbench eval` children; a completion that kills its evaluation, hangs past the service's deadline or
floods its output costs only its own sample; the TRL reward function returns one float per completion, in
order; and a cheat of each kind the judge rejects (held-out candidates of benchmarks/heldout_cheats/ and
the suite's own), run as one batch, gets reward 0 through this path, rejected by its rule."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest

from mgbench.evalchild import HEAD_CHARS, TAIL_CHARS, run_child
from mgbench.rl.service import RewardService, RewardSettings, completion_text, run_sync, trusted_records

pytestmark = pytest.mark.sandboxed

REPO = Path(__file__).resolve().parents[1]
HELDOUT = REPO / "benchmarks" / "heldout_cheats"
TASK = "l1-all_reduce-sum-bw-fp16"
HEAD = "import torch\nimport torch.distributed as dist\n"
REFERENCE = HEAD + "def solution(x):\n    y = x.clone()\n    dist.all_reduce(y)\n    return y\n"
WRONG = HEAD + "def solution(x):\n    return x * 2\n"
# kills the whole `mgbench eval` process group it runs in (`posix` is `os` under another name: past the
# static checks, so the kill happens at run time)
KILLER = "import posix\n" + HEAD + "def solution(x):\n    posix.killpg(posix.getpgid(0), 9)\n"
# ~40 MB at import and 200 kB a call on stdout and on stderr: a correct answer that floods (past the caps at
# import; kept light per call, so that under load it still ends well within the service's deadline)
FLOOD = (
    "import sys\n"
    + HEAD
    + "print('{' * 1000 + 'x' * 40_000_000)\n"
    + "def solution(x):\n    sys.stdout.write('y' * 200_000)\n    sys.stderr.write('z' * 200_000)\n"
    + "    y = x.clone()\n    dist.all_reduce(y)\n    return y\n"
)
FAST = dict(trials=2, timing_budget=0.3, min_iters=20, backend="gloo", world_size=2, max_evals=2)


def fenced(code: str) -> str:
    return f"Here is my solution.\n\n```python\n{code}```\n"


def settings(tasks: Path, **kw) -> RewardSettings:
    return RewardSettings(dataset=str(tasks), **{**FAST, "timeout": 20.0, "deadline": 240.0, **kw})


def test_a_child_that_floods_its_output_is_read_within_the_caps():
    code = "import sys; sys.stdout.write('{' + 'x' * 30_000_000 + '\\nend'); sys.stderr.write('e' * 30_000_000)"
    rc, out, err = anyio.run(run_child, [sys.executable, "-c", code], dict(os.environ), 60.0)
    assert rc == 0 and out.endswith("\nend") and out.startswith("{x")
    assert len(out) < HEAD_CHARS + TAIL_CHARS + 200 and len(err) < HEAD_CHARS + TAIL_CHARS + 200
    assert "characters of output dropped" in out


def test_a_record_the_evaluation_cannot_vouch_for_is_a_failed_verdict(tmp_path):
    import json

    fail = lambda status, why: {"status": status, "correct": False, "reason": why}  # noqa: E731
    good = {"task_id": "t", "sample_hash": "h", "status": "correct", "correct": True, "speedup": 1.0, "world_size": 2}
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(good) + "\n")
    printed = json.dumps(good, indent=1)
    assert trusted_records(0, printed, "", results, fail) == [good]
    assert trusted_records(None, printed, "", results, fail)[0]["status"] == "timeout"
    # exit 1 (incorrect) contradicts a correct record: forged, not trusted
    assert trusted_records(1, printed, "", results, fail)[0]["status"] == "error"
    # the printed record and the results file disagree
    other = json.dumps({**good, "speedup": 50.0}, indent=1)
    assert "disagree" in trusted_records(0, other, "", results, fail)[0]["reason"]
    assert "without a record" in trusted_records(0, "", "boom", tmp_path / "none.jsonl", fail)[0]["reason"]


def test_completions_as_strings_and_chat_messages():
    assert completion_text("a") == "a"
    assert completion_text([{"role": "assistant", "content": "b"}]) == "b"
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "text", "text": "c"}]}]
    assert completion_text(msgs) == "c"
    assert completion_text(None) == ""


def test_a_kill_a_hang_and_a_flood_cost_only_their_own_samples(core_tasks, tmp_path):
    pidfile = tmp_path / "hang.pid"
    hang = f"import os, time\n{HEAD}open({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(10**6)\n"
    hang += "def solution(x):\n    return x\n"
    completions = [fenced(REFERENCE), fenced(KILLER), fenced(hang), fenced(FLOOD), fenced(WRONG), "no code at all"]
    # the service's deadline (25 s) ends the hang long before eval's own phase timeout (120 s)
    # sandbox off: the hanging candidate writes its pid where the test reads it (in the sandbox every folder
    # but its own scratch is read-only; what it leaves dies with its namespace: tests/test_eval_sandbox.py)
    svc = RewardService(settings(core_tasks, timeout=120.0, deadline=25.0, max_evals=3, sandbox="off"))
    t0 = time.monotonic()
    scored = run_sync(lambda: svc.evaluate_batch(completions, [TASK] * len(completions)))
    wall = time.monotonic() - t0
    kinds = [(s.reward.value, s.reward.kind) for s in scored]
    assert kinds == [
        (0.5, "correct_only"),
        (0.0, "incorrect"),
        (0.0, "incorrect"),
        (0.5, "correct_only"),
        (0.0, "incorrect"),
        (0.0, "no_code"),
    ], [s.reward.reason for s in scored]
    assert "without a record" in scored[1].reward.reason  # the killed evaluation left none
    assert "did not finish within 25s" in scored[2].reward.reason and wall < 200
    pid = int(pidfile.read_text())  # the hanging candidate went with its evaluation's process group
    for _ in range(50):
        if not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            break
        time.sleep(0.1)
    else:
        pytest.fail("the hanging candidate is still running")


def test_a_task_the_dataset_lacks_is_the_callers_error(core_tasks):
    svc = RewardService(settings(core_tasks))
    with pytest.raises(ValueError, match="unknown task"):
        svc.score_batch([fenced(REFERENCE)], ["no-such-task"])
    with pytest.raises(ValueError, match="2 task ids"):
        svc.score_batch([fenced(REFERENCE)], [TASK, TASK])


def test_the_trl_reward_function_returns_floats_in_order(core_tasks):
    from mgbench.rl.trl import MgbenchReward

    fn = MgbenchReward(str(core_tasks), **FAST, timeout=20.0)
    logged: dict[str, float] = {}
    completions = [
        [{"role": "assistant", "content": fenced(WRONG)}],
        fenced(REFERENCE),
        [{"role": "assistant", "content": "prose only"}],
        [{"role": "assistant", "content": fenced(REFERENCE)}],
    ]
    out = fn(
        prompts=["p"] * 4,
        completions=completions,
        completion_ids=[[1]] * 4,
        task_id=[TASK] * 4,
        trainer_state=None,
        log_metric=lambda name, value: logged.__setitem__(name, value),
        log_extra=lambda column, values: None,
    )
    assert out == [0.0, 0.5, 0.0, 0.5] and all(type(x) is float for x in out)
    assert logged["mgbench/correct_only"] == 0.5 and logged["mgbench/no_code"] == 0.25
    assert fn.__name__ == "mgbench"
    with pytest.raises(ValueError, match="task_id"):
        fn(prompts=["p"], completions=["x"])


# -- every kind of cheat gets 0 -------------------------------------------------------------------------------
# Through the RL path every cheat costs a `mgbench eval` child (~3 s each on 2 cores): all 38 held-out
# candidates with 15 of the suite's own took 170-210 s, past this test's budget on CI. The batch keeps one
# candidate per rule that rejects a cheat (the rule its reason must name, as judged when this set was chosen),
# plus the held-out candidates that fake a passing verdict or exit (process_control, verdict_rewrite), the
# one that replays answers through a side file across evaluations (file_replay: RL scores the same task over
# and over) and the one the CLI accepts. The suite's cheats also run in their own tests against the judge
# in-process; benchmarks/heldout_eval.py judges every held-out candidate. id_ptr_cache (a cache keyed on
# (id, data_ptr, _version)) runs with a marker of its cache hits: it hits at the latest in the judge's last
# trial, on the kept input tensors rewritten in place (earlier if the allocator reuses an address), and a hit
# costs the whole reward (a stale answer or the earlier output returned, or ranks that disagree and hang).
HELDOUT_CHEATS = {  # held-out candidate -> the rule that rejects it ("a|b": either, by a race)
    "async_nowait": "side_stream|values",  # unfinished async work: seen changing after the return, or wrong
    "partial_tail": "values",
    # a decoy's per-rank swap may leave one rank's fingerprint (its first 256 elements) unchanged and change the
    # other's: one rank replays, the other waits in its collective (a timeout), or both replay (timed_values)
    "file_replay": "timed_values|timeout",
    "lazy_subclass": "plain_output",
    "nan_inf_mix": "nonfinite",
    "frames_expected": "introspection",
    "exit_at_import": "process_control",
    "fake_exit": "process_control",
    "patch_timers": "reflection",
    "inplace_input": "aliases_input",
    "inplace_then_restore": "mutated_input",
    "verdict_rewrite": "monkeypatch",
    "upcast_fp64": "layout",
    "side_thread": "threads",
}
ID_PTR_CACHE = "id_ptr_cache"
ID_PTR_HITS = "/tmp/.mgb_id_ptr_hits"  # one line per cache hit, written by the marked candidate
# the suite's own cheats (tests/test_eval_*.py, tests/inspect_helpers.py) for the rules no held-out one covers
SUITE_CHEATS = {  # module -> {cheat -> the rule that rejects it}
    "test_eval_cheats": {"torch_function_mode_left_active": "dispatch_override"},
    # the RL path runs eval's defaults: a held-out shape's trial comes before timing and may reject a cheat
    # that turns wrong after a few calls first (test_eval_judge_separation judges these with it off)
    "test_eval_judge_separation": {
        "b1_finalizer_finishes_the_work": "timed_commit|heldout_shape",
        "b5_overwrites_the_timed_inputs": "timed_inputs|heldout_shape",
        "c4_idle_policy_on_the_reference_processes": "interference|heldout_shape",
    },
    "test_eval_heldout": {"output_on_meta_device": "output_device"},
    "test_eval_adversarial": {"reused_buffer": "reused_buffer"},
}
CHEAT_HEAD_RULE = "harness_import"  # tests/inspect_helpers.py's CHEAT_HEAD


def heldout_cheats() -> list[tuple[str, str, str, str | None]]:
    """(name, task, source, rule) of the chosen held-out candidates (rule None: id_ptr_cache, see above)."""
    out = []
    for name in [*HELDOUT_CHEATS, ID_PTR_CACHE]:
        (path,) = HELDOUT.glob(f"*@{name}.py")
        src = path.read_text()
        assert src.splitlines()[0] in ("# expect: reject", "# expect: contain"), path  # cheats by their headers
        if name == ID_PTR_CACHE:
            hit = "    if hit is not None:\n"
            assert hit in src, path
            src = src.replace(hit, hit + f"        open({ID_PTR_HITS!r}, 'a').write('hit\\n')\n")
        out.append((f"heldout_cheats/{name}", path.stem.partition("@")[0], src, HELDOUT_CHEATS.get(name)))
    return out


def suite_cheats() -> list[tuple[str, str, str, str]]:
    from importlib import import_module

    from tests.inspect_helpers import CHEAT_HEAD

    out = [("inspect_helpers/CHEAT_HEAD", "l1-all_reduce-sum-lat-fp32", CHEAT_HEAD + REFERENCE, CHEAT_HEAD_RULE)]
    for module, names in SUITE_CHEATS.items():
        mod = import_module(f"tests.{module}")
        table = getattr(mod, "ADVERSARIAL", None) or mod.CHEATS
        for name, rule in names.items():
            entry = table[name]
            if module == "test_eval_judge_separation":
                task, src = entry[0], mod.HEAD + textwrap.dedent(entry[1])
            elif module == "test_eval_heldout":
                task, src = mod.TASK, mod.HEAD + textwrap.dedent(entry[0])
            else:
                task, src = mod.TASK, entry[0]
            out.append((f"{module}/{name}", task, src, rule))
    return out


def _rejected_by(rule: str, reason: str) -> bool:
    """Whether `reason` names `rule` ("timeout": the candidate's ranks hung, no rule)."""
    return reason.startswith("timeout") if rule == "timeout" else f"rule {rule})" in reason


def test_every_kind_of_cheat_gets_reward_zero_through_the_rl_path(core_tasks):
    import shutil

    shutil.rmtree("/tmp/.mgb_replay_cache", ignore_errors=True)  # side files of earlier runs (file_replay)
    if os.path.exists(ID_PTR_HITS):
        os.remove(ID_PTR_HITS)
    cheats = heldout_cheats() + suite_cheats()
    rules = {r for *_, rule in cheats if rule for r in rule.split("|")} - {"timeout"}
    assert len(cheats) == 22 and len(rules) == 21
    # without the sandbox: file_replay's side file and c4's renice reach what they aim at (in the sandbox they
    # reach nothing and are judged on their honest work: tests/test_eval_sandbox.py, test_eval_judge_separation)
    svc = RewardService(settings(core_tasks, timeout=15.0, deadline=150.0, sandbox="off"))  # a timeout is a 0 too
    t0 = time.monotonic()
    scored = run_sync(lambda: svc.evaluate_batch([fenced(src) for _, _, src, _ in cheats], [c[1] for c in cheats]))
    wall = time.monotonic() - t0
    print(f"\n{len(cheats)} cheats scored through the RL path in {wall:.0f}s (gloo, smoke, world size 2)")
    wrong = {}
    for (name, _, _, rule), s in zip(cheats, scored):
        if rule is None:  # id_ptr_cache: its cache served an answer (the last trial provokes it), so 0
            assert os.path.exists(ID_PTR_HITS) and s.reward.value == 0.0, (name, s.reward)
        elif s.reward.value != 0.0 or not any(_rejected_by(r, s.reward.reason) for r in rule.split("|")):
            wrong[name] = (rule, s.reward.value, s.reward.kind, s.reward.reason)
    assert wrong == {}
