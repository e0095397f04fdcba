"""The `verifiers` environment (verifiers 0.4, `verifiers.v1`), offline: loaded through the library's own loader
by the id `mgbench`, it scores scripted completions with the rewards their verdicts imply (correct 0.5 on CPU,
wrong 0, prose 0, a hang 0 within its deadline, a cheat 0), and runs whole episodes against a scripted model
served on localhost: single-turn, and multi-turn with the `mgbench eval` verdict as feedback. gloo, smoke,
world size 2, on a small dataset built by `mgbench build`."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

vf = pytest.importorskip("verifiers.v1", reason="verifiers is not installed (pip install -e '.[rl]')")

from mgbench.inspect_eval.scripted import reference_of  # noqa: E402
from tests.inspect_helpers import CHEAT_HEAD, WRONG_TAIL, build_dataset  # noqa: E402

pytestmark = pytest.mark.sandboxed

TASK = "l1-all_reduce-sum-lat-bf16"
FAST = dict(trials=2, timing_budget=0.3, min_iters=20, eval_timeout=10.0, max_evals=3)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return build_dataset(tmp_path_factory.mktemp("rl-ds"))


def fenced(code: str) -> str:
    return f"My solution:\n\n```python\n{code}```\n"


def config(dataset, **taskset) -> dict:
    task = {k: v for k, v in FAST.items()}
    return {"taskset": {"id": "mgbench", "dataset": str(dataset), "task_ids": [TASK], **taskset, "task": task}}


def test_the_librarys_loader_finds_the_environment_by_its_id(dataset):
    from mgbench.rl import environment as rl_env

    env = vf.load_environment(vf.resolve_env_config(config(dataset)))
    assert type(env) is rl_env.MgbenchEnv and type(env.taskset) is rl_env.MgbenchTaskset
    assert env.config.env_id == "mgbench" and env.config.agent.harness is None
    assert vf.default_harness_id("mgbench") == "mgbench"  # the in-process chat harness
    assert vf.environment_class("someone/mgbench@1.0") is rl_env.MgbenchEnv  # Hub-style ids
    (task,) = list(env.taskset)
    assert task.data.task_id == TASK and "```python" in task.data.prompt and task.key == f"mgbench:{TASK}"
    # the keyword form builds the same config and loads it through the same loader
    env2 = rl_env.load_environment(dataset=str(dataset), task_ids=TASK, protocol="multi_turn", max_turns=3, **FAST)
    (t2,) = list(env2.taskset)
    assert (t2.data.protocol, t2.data.max_turns, t2.config.trials) == ("multi_turn", 3, 2)
    with pytest.raises(ValueError, match="protocol"):
        rl_env.load_environment(dataset=str(dataset), protocol="agentic")


def _trace(task, reply: str):
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.types import AssistantMessage, UserMessage

    return vf.Trace(
        agent=vf.AgentInfo(config=vf.AgentConfig()),
        task=vf.TraceTask(type=type(task).__name__, data=task.data),
        nodes=[
            MessageNode(parent=None, message=UserMessage(content=task.data.prompt), sampled=False),
            MessageNode(parent=0, message=AssistantMessage(content=reply), sampled=True),
        ],
    )


def test_scripted_completions_score_as_their_verdicts_imply(dataset):
    env = vf.load_environment(vf.resolve_env_config(config(dataset)))
    (task,) = list(env.taskset)
    ref = reference_of(task.data.prompt)
    hang = "import time\nimport torch\n\ndef solution(*args):\n    time.sleep(10**6)\n"
    replies = {
        "correct": fenced(ref),
        "wrong": fenced(ref + WRONG_TAIL),
        "prose": "I would fuse the all-reduce into the compute, but here is no code.",
        "hang": fenced(hang),
        "cheat": fenced(CHEAT_HEAD + ref),
    }
    traces = {k: _trace(task, v) for k, v in replies.items()}

    async def score_all() -> None:
        await asyncio.gather(*(task.score(t) for t in traces.values()))

    t0 = time.monotonic()
    asyncio.run(score_all())
    wall = time.monotonic() - t0
    rewards = {k: t.reward for k, t in traces.items()}
    assert rewards == {"correct": 0.5, "wrong": 0.0, "prose": 0.0, "hang": 0.0, "cheat": 0.0}, rewards
    m = {k: t.metrics for k, t in traces.items()}
    assert m["correct"]["kind_correct_only"] == 1.0 and m["correct"]["correct"] == 1.0
    assert "speedup" not in m["correct"]  # CPU timings are not results: no speed counted
    assert m["prose"]["kind_no_code"] == 1.0 and m["prose"]["answer_found"] == 0.0
    assert m["wrong"]["kind_incorrect"] == m["cheat"]["kind_incorrect"] == m["hang"]["kind_incorrect"] == 1.0
    # the hang ended at eval's phase timeout (10 s), far within the evaluation's deadline
    assert wall < task.settings().deadline_s()


# -- whole episodes against a scripted model on localhost ------------------------------------------------------
def scripted_server(reply):
    """An OpenAI-compatible chat endpoint on 127.0.0.1 whose answers come from reply(messages)."""
    seen: list[list[dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body["messages"])
            out = {
                "id": f"chatcmpl-{len(seen)}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "scripted"),
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply(body)}}
                ],
                "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
            }
            data = json.dumps(out).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1", seen


def wrong_then_right(body: dict) -> str:
    """First answer: the reference doubled (wrong); after the verdict: the reference."""
    msgs = body["messages"]
    ref = reference_of(next(m["content"] for m in msgs if m["role"] == "user"))
    answered = sum(m["role"] == "assistant" for m in msgs)
    return fenced(ref + WRONG_TAIL) if answered == 0 else fenced(ref)


def run_episode(dataset, monkeypatch, reply, **taskset):
    monkeypatch.setenv("MGBENCH_SCRIPTED_KEY", "offline")
    server, url, seen = scripted_server(reply)
    try:
        env = vf.load_environment(vf.resolve_env_config(config(dataset, **taskset)))
        (task,) = list(env.taskset)
        ctx = vf.ModelContext(
            model="scripted", client=vf.EvalClientConfig(base_url=url, api_key_var="MGBENCH_SCRIPTED_KEY")
        )

        async def main():
            async with env.serving():
                return await env.run_episode(task, ctx)

        episode = asyncio.run(main())
    finally:
        server.shutdown()
    assert episode.ok, episode.errors
    (trace,) = episode.traces
    return trace, seen


def test_a_single_turn_episode_is_scored_by_its_one_answer(dataset, monkeypatch):
    trace, seen = run_episode(dataset, monkeypatch, wrong_then_right)
    assert len(seen) == 1 and trace.num_turns == 1
    assert seen[0][0]["role"] == "system" and "```python" in seen[0][1]["content"]
    assert trace.reward == 0.0 and trace.metrics["kind_incorrect"] == 1.0  # its one answer was wrong


def test_a_multi_turn_episode_gets_the_verdict_as_feedback_and_is_scored_by_its_last_answer(dataset, monkeypatch):
    trace, seen = run_episode(dataset, monkeypatch, wrong_then_right, protocol="multi_turn", max_turns=3)
    assert len(seen) == 2 and trace.num_turns == 2  # right at the second answer: the exchange ends there
    feedback = seen[1][-1]
    assert feedback["role"] == "user" and "It is not accepted" in feedback["content"]
    verdict = json.loads(feedback["content"].split("returned:\n\n", 1)[1].split("\n\n", 1)[0])
    assert verdict["status"] == "incorrect" and "wrong output" in verdict["reason"] and verdict["world_size"] == 2
    assert trace.reward == 0.5 and trace.metrics["correct"] == 1.0 and trace.metrics["turns"] == 2.0
