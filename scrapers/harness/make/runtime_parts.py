"""The task-side runtime as an explicit list of parts: which files of scrapers/harness/make/runtime/ a level-4
task module carries, in which order, and their text. Host side: it reads the parts and is not inlined.

A part's text is its file below the leading docstring (the docstring is for readers of the folder).
Every task module carries the EVERY_TASK parts, joined in that order (`runtime_source`). An ON_DEMAND
part is added by render.py only to the task modules that need it, after its lead line, so no other
task's text changes; they are listed in the order they appear in a task module (optim, drain, triton
and numpy after the runtime, backward after the mined code). Every file in the folder is one of these.

The folder's files are kept byte for byte (their text is in every level-4 task's content hash), so the
host-side paths their comments name are those from before the harness had rooms: `scrapers/harness/X.py`
there is make/X.py (standins, runtime_parts) or run/X.py (settle).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

RUNTIME_DIR = Path(__file__).with_name("runtime")
EVERY_TASK: tuple[str, ...] = ("__init__.py", "repo_globals.py", "cuda_on_cpu.py")


@dataclass(frozen=True)
class OnDemandPart:
    """A part only some task modules carry."""

    file: str
    lead: str  # the text above it in a task module (a format string: `{backward_of}` is the spec's)
    when: str  # what adds it (render.py decides)


ON_DEMAND: dict[str, OnDemandPart] = {
    "optim": OnDemandPart(
        "standin_optim.py",
        "# ---- harness: optimizer inputs (synthesized, not mined) ----\n",
        "the spec draws an optimizer kind (optimfix.OPTIM_KINDS)",
    ),
    "drain": OnDemandPart(
        "standin_drain.py",
        "# ---- harness: wait for the call's outstanding communication (synthesized, not mined) ----\n",
        'the spec has "drain"',
    ),
    "triton": OnDemandPart(
        "standin_triton.py",
        "# ---- harness stand-in for triton (synthesized, not mined) ----\n",
        "the rewritten module uses the `_MgTriton` stand-in",
    ),
    "numpy": OnDemandPart(
        "standin_numpy.py",
        "# ---- harness stand-in for numpy (synthesized, not mined) ----\n",
        "the rewritten module uses the `_MgNumpy` stand-in",
    ),
    "backward": OnDemandPart(
        "standin_backward.py",
        "# ---- harness: forward and backward of {backward_of} (synthesized) ----\n"
        "_MG_BACKWARD_OF = {backward_of!r}\n\n\n",
        'the spec has "backward_of"',
    ),
}


def part_text(file: str) -> str:
    """The text a task module carries of the runtime part `file` (a file name in RUNTIME_DIR)."""
    path = RUNTIME_DIR / file
    text = path.read_text()
    if not text.startswith('"""'):
        raise ValueError(f"{path}: a runtime part starts with its docstring")
    return text.split('"""', 2)[2].strip("\n")


def runtime_source() -> str:
    """The runtime every level-4 task module carries: the EVERY_TASK parts in order."""
    return "\n\n\n".join(part_text(f) for f in EVERY_TASK) + "\n"


def on_demand(key: str, **fields: str) -> str:
    """The ON_DEMAND part `key` as a task module carries it: its lead (with `fields`), then its text."""
    part = ON_DEMAND[key]
    return part.lead.format(**fields) + part_text(part.file)
