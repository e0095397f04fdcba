"""Helpers of the Inspect task tests: a small real dataset, scripted replies and a mock-model runner."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.dataset_helpers import child_env, mgbench

TASK_RE = re.compile(r"# Task `([^`]+)`")
# the reference's outputs doubled: right structure, dtype and shape, wrong values
WRONG_TAIL = "\n\n_reference_solution = solution\n\n\ndef solution(*args):\n    return _reference_solution(*args) * 2\n"
CHEAT_HEAD = "from mgbench.validation.eval import handlers  # reach into the harness\n"


def build_dataset(out: Path) -> Path:
    """`mgbench build` of the bf16 all_reduce tasks (generated, validated on gloo, published)."""
    proc = mgbench("build", "--out", str(out), "--family", "all_reduce", "--dtype", "bf16", env=child_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out / "dataset"


def reply(code: str | None, prose: str = "Here is the solution.") -> str:
    return prose if code is None else f"{prose}\n\n```python\n{code}```\n"


def task_of(messages: list[Any]) -> str:
    """The task id named in the first user message (the rendered prompt)."""
    from inspect_ai.model import ChatMessageUser

    text = next(m.text for m in messages if isinstance(m, ChatMessageUser))
    return TASK_RE.search(text).group(1)


def output(text: str | None = None, tool: tuple[str, dict[str, Any]] | None = None) -> Any:
    """A scripted ModelOutput with its own usage (Inspect's mockllm would otherwise count tokens with
    tiktoken, which downloads an encoding: no network here)."""
    from inspect_ai.model import ModelOutput, ModelUsage

    if tool:
        out = ModelOutput.for_tool_call("mockllm/model", tool[0], tool[1])
    else:
        out = ModelOutput.from_content("mockllm/model", text or "")
    out.usage = ModelUsage(input_tokens=100, output_tokens=10, total_tokens=110)
    return out


def scripted_model(script: Callable[[list[Any], list[Any]], Any]) -> Any:
    """mockllm/model whose every output comes from script(messages, tools)."""
    from inspect_ai.model import get_model

    def outputs(messages, tools, tool_choice, config):
        return script(messages, tools)

    return get_model("mockllm/model", custom_outputs=outputs)


def run(task: Any, model: Any, log_dir: Path) -> Any:
    """inspect_ai.eval of one task; the log (asserting it finished)."""
    from inspect_ai import eval as inspect_eval

    log = inspect_eval(task, model=model, log_dir=str(log_dir), display="none", max_samples=4)[0]
    assert log.status == "success", log.error
    return log


def metrics(log: Any, reducer: str | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for s in log.results.scores:
        if s.reducer == reducer:
            out.update({k: m.value for k, m in s.metrics.items()})
    return out
