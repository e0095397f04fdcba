"""mgbench as a `verifiers` environment (verifiers 0.4, the `verifiers.v1` stack): a taskset of mgbench
tasks, a task whose reward is the reward service's (mgbench.rl.service -> mgbench.rl.reward), an env with
two protocols and an in-process chat harness.

    single_turn  the task's prompt, one answer; the reward of its last ```python block
    multi_turn   the prompt, an answer, then the `mgbench eval` verdict of that answer as the next user
                 message (the JSON the Inspect agent's evaluate() tool returns), up to `max_turns` answers
                 (stopping at the first correct one unless stop_when_correct is off); the reward is the
                 last answer's

The library's loader finds it by the id `mgbench` (`vf.load_environment` -> `environment_class("mgbench")`
-> `import mgbench`, whose `__all__` names the three classes below, imported lazily); the Hub forms
`<owner>/mgbench[@version]` resolve to the same module. `load_environment(...)` below builds the config
from keyword arguments and loads it through that loader:

    from mgbench.rl.environment import load_environment
    env = load_environment(dataset="mgbench-out/dataset", levels=[1, 2], protocol="multi_turn", max_turns=4)

The same from the verifiers CLI: `eval mgbench --env.taskset.dataset mgbench-out/dataset ...`. docs/train.md
lists every argument. Needs the `rl` extra (pip install -e '.[rl]').
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, Literal

import verifiers.v1 as vf
from pydantic import Field, field_validator

from mgbench.inspect_eval.extract import extract_code
from mgbench.rl.prompts import SYSTEM_PROMPT, feedback_message, is_correct
from mgbench.rl.service import RewardSettings, Scored, service_for
from mgbench.taskrows import DEFAULT_DATASET, as_list, metadata_of, prompt_of, resolve_dataset, select_rows

ENV_ID = "mgbench"
PROTOCOLS = ("single_turn", "multi_turn")


# -- data and configs -----------------------------------------------------------------------------------
class MgbenchData(vf.TaskData):
    """One mgbench task as a rollout sees it (the row's prompt plus what scoring needs)."""

    task_id: str
    dataset: str  # resolved dataset folder or Hub id
    world_size: int = 2
    protocol: str = "single_turn"
    max_turns: int = 1
    level: int = 0
    family: str = ""
    dims: list[str] = Field(default_factory=list)
    dtype: str = ""


class MgbenchTaskConfig(vf.TaskConfig):
    """How an answer is evaluated (mgbench.evalchild.EvalSettings; `--env.taskset.task.*`)."""

    eval_backend: str = "auto"
    """auto (NCCL when enough GPUs are visible, else gloo), gloo or nccl."""
    size: str | None = None
    """Size class of the evaluation (default: smoke on gloo, full on NCCL)."""
    trials: int = 5
    """Correctness trials per evaluation, a fresh seed each."""
    timing: bool = True
    """Time the answer against the reference (off: correctness only)."""
    timing_budget: float = 1.0
    """Seconds of timing per timed function."""
    min_iters: int = 50
    """Timed iterations at least."""
    eval_timeout: float | None = None
    """Seconds per evaluation phase (default: 60 on gloo, 300 on NCCL)."""
    deadline: float | None = None
    """Seconds per evaluation child, all phases together (default: from the above)."""
    hardware: str | None = None
    """Hardware tag of the recorded baselines to compare with."""
    baselines: list[str] = Field(default_factory=list)
    """More baselines.jsonl files."""
    max_evals: int | None = None
    """Concurrent evaluations (default: GPUs // world size on NCCL, cores // (world size + 1) on gloo)."""
    stop_when_correct: bool = True
    """multi_turn: end the exchange at the first correct answer."""


class MgbenchTasksetConfig(vf.TasksetConfig):
    """Which tasks load and how they are asked (`--env.taskset.*`)."""

    id: str = ENV_ID
    dataset: str = DEFAULT_DATASET
    """Dataset folder or Hub id (`mgbench build` writes mgbench-out/dataset)."""
    split: str | None = None
    """Dataset split (level1, level2, ...; default: every split)."""
    levels: list[int] = Field(default_factory=list)
    """Only these levels."""
    task_ids: list[str] = Field(default_factory=list)
    """Only these task ids or shell patterns (l1-all_reduce-*)."""
    world_size: int = 2
    """Ranks of the evaluation (tasks that do not support it are left out)."""
    prompt_backend: str = "cuda"
    """The prompt variant of the dataset (cuda, triton)."""
    protocol: Literal["single_turn", "multi_turn"] = "single_turn"
    """single_turn: one answer; multi_turn: the eval verdict as feedback, up to max_turns answers."""
    max_turns: int = Field(4, ge=1)
    """multi_turn: answers at most (the reward is the last one's)."""
    system_prompt_text: str | None = SYSTEM_PROMPT
    """The system prompt (None: the task prompt alone)."""
    task: MgbenchTaskConfig = MgbenchTaskConfig()

    @field_validator("levels", "task_ids", mode="before")
    @classmethod
    def _listed(cls, v: Any) -> Any:
        return as_list(v) if isinstance(v, str | int) else v


# -- the task: its reward ----------------------------------------------------------------------------------
_FEEDBACK_CACHE: OrderedDict[tuple[str, str], Scored] = OrderedDict()  # (trace id, code hash) -> evaluation
_CACHE_MAX = 4096


def _code_key(trace_id: str, code: str | None) -> tuple[str, str]:
    return trace_id, hashlib.sha256((code or "").encode()).hexdigest()


class MgbenchTask(vf.Task[MgbenchData, vf.State, MgbenchTaskConfig]):
    @property
    def key(self) -> str:
        return f"mgbench:{self.data.task_id}"

    def settings(self) -> RewardSettings:
        c = self.config
        return RewardSettings(
            dataset=self.data.dataset,
            world_size=self.data.world_size,
            backend=c.eval_backend,
            size=c.size,
            trials=c.trials,
            timing=c.timing,
            timing_budget=c.timing_budget,
            min_iters=c.min_iters,
            timeout=c.eval_timeout,
            hardware=c.hardware,
            baselines=list(c.baselines),
            max_evals=c.max_evals,
            deadline=c.deadline,
        )

    async def evaluate(self, reply: str, trace_id: str | None = None) -> Scored:
        """The reward service's verdict of one reply (cached per trace for the reward of a multi-turn run,
        whose last answer the env already evaluated for feedback)."""
        key = _code_key(trace_id, extract_code(reply)) if trace_id else None
        if key and key in _FEEDBACK_CACHE:
            return _FEEDBACK_CACHE[key]
        service = service_for(self.settings())
        await service.check_tasks_async([self.data.task_id])
        scored = await service.evaluate(reply, self.data.task_id)
        if key:
            _FEEDBACK_CACHE[key] = scored
            while len(_FEEDBACK_CACHE) > _CACHE_MAX:
                _FEEDBACK_CACHE.popitem(last=False)
        return scored

    @vf.stop
    async def answered(self, trace: vf.Trace) -> bool:
        """single_turn: one answer; multi_turn: the env drives the turns, at most max_turns answers."""
        limit = 1 if self.data.protocol == "single_turn" else self.data.max_turns
        return trace.num_turns >= limit

    @vf.reward(weight=1.0)
    async def mgbench(self, trace: vf.Trace) -> float:
        """The reward of the last answer (mgbench.rl.reward); its verdict as metrics."""
        scored = await self.evaluate(trace.last_reply, trace.id)
        _FEEDBACK_CACHE.pop(_code_key(trace.id, scored.code), None)
        r = scored.reward
        verdict = r.verdict or {}
        metrics = {
            "correct": float(bool(verdict.get("counted_correct"))),
            "answer_found": float(scored.code is not None),
            "timed": float(bool(verdict.get("timed"))),
            "turns": float(trace.num_turns),
            **{f"kind_{k}": float(r.kind == k) for k in ("no_code", "incorrect", "suspicious", "sol", "speedup")},
            "kind_correct_only": float(r.kind == "correct_only"),
        }
        if verdict.get("sol_score") is not None:
            metrics["sol_score"] = float(verdict["sol_score"])
        if verdict.get("counted_speedup") is not None:  # None where timings are not results (CPU, gloo, smoke)
            metrics["speedup"] = float(verdict["counted_speedup"])
        trace.record_metrics(metrics)
        return r.value


# -- the taskset -----------------------------------------------------------------------------------------
class MgbenchTaskset(vf.Taskset[MgbenchTask, MgbenchTasksetConfig]):
    """The tasks of an mgbench dataset that match the filters, sorted by task id."""

    def load(self) -> Iterable[MgbenchTask]:
        c = self.config
        if c.protocol not in PROTOCOLS:
            raise ValueError(f"protocol {c.protocol!r}: choose one of {', '.join(PROTOCOLS)}")
        spec = resolve_dataset(c.dataset)
        rows = select_rows(spec, c.split, c.levels or None, c.task_ids or None, c.world_size)
        for row in rows:
            meta = metadata_of(row)
            yield MgbenchTask(
                MgbenchData(
                    id=row["task_id"],
                    name=row["task_id"],
                    prompt=prompt_of(row, c.prompt_backend),
                    system_prompt=c.system_prompt_text,
                    task_id=row["task_id"],
                    dataset=spec,
                    world_size=c.world_size,
                    protocol=c.protocol,
                    max_turns=1 if c.protocol == "single_turn" else c.max_turns,
                    level=int(meta.get("level") or 0),
                    family=str(meta.get("family") or ""),
                    dims=[str(d) for d in meta["dims"]],
                    dtype=str(meta.get("dtype") or ""),
                ),
                c.task,
            )


# -- the harness: one chat completion per segment, in-process ---------------------------------------------
class MgbenchHarnessConfig(vf.HarnessConfig):
    id: str = ENV_ID


class MgbenchHarness(vf.Harness[MgbenchHarnessConfig]):
    """A plain chat loop run in-process (no program to install, no box needed): each segment sends the
    conversation to the interception endpoint once and takes the model's answer, which the trace records.
    Any OpenAI-compatible model; `--env.agent.harness.id null` picks verifiers' own chat program instead."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, **_: Any) -> Any:
        from openai import AsyncOpenAI
        from verifiers.v1.dialects.chat import message_to_wire
        from verifiers.v1.runtimes import ProgramResult

        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt:
            messages += [message_to_wire(m) for m in prompt]
        client = AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=0)
        try:
            await client.chat.completions.create(model=ctx.model, messages=messages)
        except Exception as e:  # noqa: BLE001 - a refused turn (a @stop, a limit) or a provider error
            if trace.stop_condition is None:
                return ProgramResult(exit_code=1, stdout="", stderr=f"{type(e).__name__}: {e}")
        finally:
            await client.close()
        return ProgramResult(exit_code=0, stdout="", stderr="")


# -- the env: the two protocols -------------------------------------------------------------------------
class MgbenchEnvConfig(vf.SingleAgentEnvConfig):
    """The single `agent` seat, run on the host by default (the harness is in-process; evaluations run in
    child processes of the env either way)."""

    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class MgbenchEnv(vf.Env[MgbenchEnvConfig]):
    """single_turn: one segment. multi_turn: answer, verdict as feedback, answer again, up to max_turns."""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        data = task.data
        if getattr(data, "protocol", "single_turn") != "multi_turn":
            await agents.agent.run(task)
            return
        async with agents.agent.interaction(task) as chat:
            segment = await chat.turn()
            for answered in range(1, data.max_turns):
                if segment.terminated:
                    break
                scored = await task.evaluate(segment.last_reply, chat.trace.id)
                if is_correct(scored) and task.config.stop_when_correct:
                    break
                segment = await chat.turn(feedback_message(scored, data.max_turns - answered))


# -- loading ---------------------------------------------------------------------------------------------
def env_config(
    dataset: str = DEFAULT_DATASET,
    split: str | None = None,
    levels: int | str | list[int] | None = None,
    task_ids: str | list[str] | None = None,
    world_size: int = 2,
    protocol: str = "single_turn",
    max_turns: int = 4,
    prompt_backend: str = "cuda",
    system_prompt: str | None = SYSTEM_PROMPT,
    agent: dict[str, Any] | None = None,
    **task: Any,
) -> dict[str, Any]:
    """The env config (as the verifiers CLI or a TOML file would give it) of load_environment's arguments;
    `task` are MgbenchTaskConfig fields (trials, timing, eval_timeout, max_evals, ...)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol {protocol!r}: choose one of {', '.join(PROTOCOLS)}")
    unknown = sorted(set(task) - set(MgbenchTaskConfig.model_fields))
    if unknown:
        raise TypeError(f"unknown argument(s) {unknown}; see docs/train.md")
    taskset = {
        "id": ENV_ID,
        "dataset": dataset,
        "split": split,
        "levels": [int(x) for x in as_list(levels if not isinstance(levels, int) else str(levels))],
        "task_ids": as_list(task_ids),
        "world_size": world_size,
        "prompt_backend": prompt_backend,
        "protocol": protocol,
        "max_turns": max_turns,
        "system_prompt_text": system_prompt,
        "task": task,
    }
    config: dict[str, Any] = {"taskset": taskset}
    if agent:
        config["agent"] = agent
    return config


def load_environment(**kwargs: Any) -> vf.Env:
    """The mgbench environment, built through verifiers' own loader (`vf.load_environment`) from the
    arguments of env_config (dataset, split, levels, task_ids, world_size, protocol, max_turns, ...)."""
    return vf.load_environment(vf.resolve_env_config(env_config(**kwargs)))


__all__ = [
    "ENV_ID",
    "MgbenchData",
    "MgbenchEnv",
    "MgbenchEnvConfig",
    "MgbenchHarness",
    "MgbenchHarnessConfig",
    "MgbenchTask",
    "MgbenchTaskConfig",
    "MgbenchTaskset",
    "MgbenchTasksetConfig",
    "env_config",
    "load_environment",
]
