"""`mgbench_scripted/<mode>`: an offline model provider for trying the task end to end without an API.

    inspect eval mgbench/mgbench --model mgbench_scripted/reference --limit 3
    inspect eval mgbench/mgbench --model mgbench_scripted/reference -T protocol=agent --limit 1

Modes: `reference` answers each task with the reference implementation copied from its prompt (a
correct solution, speedup about 1); with the agent's tools it calls evaluate() on it first and then
submits it. `no-code` answers in prose only. Every output carries its own token usage: Inspect's
`mockllm` provider estimates missing usage with tiktoken, which downloads an encoding on first use
and so fails without a network.
"""

from __future__ import annotations

from typing import Any

from inspect_ai.model import (
    ChatMessage,
    ChatMessageTool,
    ChatMessageUser,
    GenerateConfig,
    ModelAPI,
    ModelOutput,
    ModelUsage,
    modelapi,
)
from inspect_ai.tool import ToolChoice, ToolInfo

from mgbench.inspect_eval.extract import code_blocks

MODES = ("reference", "no-code")


def usage_for(prompt: str, reply: str) -> ModelUsage:
    """A rough count (4 characters a token) so that nothing needs a tokenizer download."""
    i, o = len(prompt) // 4 + 1, len(reply) // 4 + 1
    return ModelUsage(input_tokens=i, output_tokens=o, total_tokens=i + o)


def reference_of(prompt: str) -> str:
    """The reference implementation: the first python block of an mgbench prompt."""
    for b in code_blocks(prompt):
        if b.label in ("python", "py", "python3"):
            return b.body.strip("\n") + "\n"
    raise ValueError("the prompt holds no ```python block (not an mgbench prompt?)")


def scripted_output(mode: str, messages: list[ChatMessage], tools: list[ToolInfo], model: str) -> ModelOutput:
    """The scripted reply to `messages` in `mode` (with usage set)."""
    prompt = next((m.text for m in messages if isinstance(m, ChatMessageUser)), "")
    names = {t.name for t in tools}
    if mode == "no-code":
        out = ModelOutput.from_content(model, "I would fuse the collective with the compute; no code yet.")
    elif {"evaluate", "submit"} <= names:
        evaluated = any(isinstance(m, ChatMessageTool) and m.function == "evaluate" for m in messages)
        tool_name = "submit" if evaluated else "evaluate"
        out = ModelOutput.for_tool_call(model, tool_name, {"code": reference_of(prompt)})
    else:
        text = f"The reference itself:\n\n```python\n{reference_of(prompt)}```\n"
        out = ModelOutput.from_content(model, text)
    out.usage = usage_for(prompt, out.completion or "")
    return out


@modelapi(name="mgbench_scripted")
class ScriptedModel(ModelAPI):
    """Scripted replies computed from each task's prompt (see the module docstring)."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig = GenerateConfig(),
        **model_args: Any,
    ) -> None:
        super().__init__(model_name, base_url, api_key, [], config)
        if model_name not in MODES:
            raise ValueError(f"mgbench_scripted/{model_name}: unknown mode (modes: {', '.join(MODES)})")

    async def generate(
        self, input: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice, config: GenerateConfig
    ) -> ModelOutput:
        return scripted_output(self.model_name, input, tools, f"mgbench_scripted/{self.model_name}")
