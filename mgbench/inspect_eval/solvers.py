"""The three protocols: zero-shot (one reply), parallel sampling (zero-shot over Inspect epochs) and an
agent with test-time feedback (Inspect's react() loop with an evaluate(code) tool and a submit tool)."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import uuid4

from inspect_ai.agent import AgentPrompt, AgentSubmit, as_solver, react
from inspect_ai.solver import Generate, Solver, TaskState, generate, solver
from inspect_ai.tool import Tool, tool
from inspect_ai.util import time_limit, turn_limit

from mgbench.inspect_eval.evaluator import EvalSettings, HarnessError, evaluate_file, verdict
from mgbench.inspect_eval.extract import as_code_block, extract_code

PROTOCOLS = ("zero_shot", "agent")

AGENT_INSTRUCTIONS = """\
You are optimizing a multi-GPU kernel task. You have two tools:
- evaluate(code): runs the benchmark's harness (`mgbench eval`) on a complete candidate solution file
  and returns its JSON verdict: status (correct / incorrect / error / timeout), the reason of a
  rejection, the speedup over the reference and the noise floor. Each call costs real evaluation time.
- submit(code): submits your final solution file; this ends the task. Only the submitted file is scored.
Iterate with evaluate until you are satisfied, then submit. Pass the whole Python file each time.
"""


def zero_shot() -> Solver:
    """The task's rendered prompt as the user message, one reply; the scorer extracts the code block."""
    return generate()


def _code_of(code: str) -> str:
    """The file a tool received: the last python block when the model fenced it, else the text."""
    return extract_code(code) or (code if code.endswith("\n") else code + "\n")


@tool
def evaluate(settings: dict, folder: str, task_id: str) -> Tool:
    async def execute(code: str) -> str:
        """Evaluate a candidate solution file with the benchmark harness.

        Args:
            code: The complete Python solution file (defining solution(...) like the reference).

        Returns:
            The JSON verdict: status, reason, speedup, noise floor, flags.
        """
        path = Path(folder) / "agent-evaluations" / f"{task_id}@{uuid4().hex[:12]}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_code_of(code))
        try:
            rec = await evaluate_file(EvalSettings(**settings), task_id, path)
        except HarnessError as e:
            return json.dumps({"status": "error", "reason": f"harness: {e}"})
        return json.dumps(verdict(rec), sort_keys=True)

    return execute


@tool
def submit_solution() -> Tool:
    async def execute(code: str) -> str:
        """Submit the final solution file for scoring (ends the task).

        Args:
            code: The complete Python solution file.

        Returns:
            The submitted file as one python code block.
        """
        return as_code_block(code)

    return execute


@solver
def agent(settings: dict, folder: str, max_turns: int = 10, time_limit_s: float | None = 1800.0) -> Solver:
    """react() with evaluate(code) and submit(code), within `max_turns` model turns and `time_limit_s`
    seconds; when a budget runs out the sample goes to scoring with whatever the last reply holds.
    The loop and its limits are built per sample: the evaluate tool is bound to the sample's task, and
    a limit counts the usage of the one sample it is applied to."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        limits = [turn_limit(max_turns)] + ([time_limit(time_limit_s)] if time_limit_s else [])
        loop = react(
            prompt=AgentPrompt(instructions=AGENT_INSTRUCTIONS),
            tools=[evaluate(settings, folder, str(state.sample_id))],
            submit=AgentSubmit(name="submit", tool=submit_solution(), answer_only=True),
        )
        return await as_solver(loop, limits=limits)(state, generate)

    return solve
