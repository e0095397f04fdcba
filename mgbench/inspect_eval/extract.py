"""Find the solution file in a model's reply: the last fenced Python code block."""

from __future__ import annotations

from dataclasses import dataclass

PYTHON_LABELS = {"", "python", "python3", "py"}


@dataclass
class Block:
    """One fenced block of a Markdown reply: its info string (language) and body."""

    label: str
    body: str


def code_blocks(reply: str) -> list[Block]:
    """Fenced blocks in order, scanned line by line (a fence opens with ``` and an optional label and
    closes with a bare ``` line; an unclosed last block runs to the end of the reply)."""
    blocks: list[Block] = []
    label: str | None = None
    body: list[str] = []
    for line in reply.splitlines():
        s = line.strip()
        if label is None:
            if s.startswith("```"):
                label, body = s[3:].strip().lower(), []
        elif s == "```":
            blocks.append(Block(label, "\n".join(body)))
            label = None
        else:
            body.append(line)
    if label is not None:
        blocks.append(Block(label, "\n".join(body)))
    return blocks


def extract_code(reply: str | None) -> str | None:
    """The body of the last ```python (or unlabelled) block of `reply`; None when there is none or it
    is empty. Blocks labelled with another language (```cuda, ```bash) are not the answer."""
    if not reply:
        return None
    py = [b.body for b in code_blocks(reply) if b.label in PYTHON_LABELS and b.body.strip()]
    return py[-1].strip("\n") + "\n" if py else None


def as_code_block(code: str) -> str:
    """`code` as one ```python block (unchanged when it already holds one)."""
    if extract_code(code) is not None:
        return code
    body = code.rstrip("\n")
    return f"```python\n{body}\n```"
