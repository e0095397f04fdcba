"""Render the solver prompt of a task, one per backend, from templates/prompts/<backend>.md.j2."""

from __future__ import annotations

import ast
import json
from functools import lru_cache
from typing import Any

import jinja2

from mgbench.dataset.baselines import Hardware
from mgbench.dataset.schema import BACKENDS
from mgbench.templates import TEMPLATES_DIR

LEVEL_NAMES = {
    1: "a collective primitive",
    2: "one compute op fused with its communication",
    3: "composed layers and multi-dimensional parallel plans",
    4: "mined from a real repository",
}


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR / "prompts")),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def solution_args(source: str) -> list[str]:
    """Argument names of the module's top-level `solution` (with * / ** markers)."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == "solution":
            a = node.args
            names = [x.arg for x in a.posonlyargs + a.args]
            names += [f"*{a.vararg.arg}"] if a.vararg else []
            names += [x.arg for x in a.kwonlyargs]
            names += [f"**{a.kwarg.arg}"] if a.kwarg else []
            return names
    raise ValueError("the module defines no top-level solution()")


def fmt(x: float | None) -> str:
    """Numbers in prompt and card tables: 4 significant digits, a dash when absent."""
    return "-" if x is None else f"{x:.4g}"


def render_prompt(backend: str, row: dict[str, Any], hardware: list[Hardware]) -> str:
    """The prompt of `row` (a dataset row without `prompt`) for `backend`, given its hardware."""
    sizes = json.loads(row["sizes"])
    full = ", ".join(f"{k}={v}" for k, v in sorted(sizes.get("full", {}).items())) or "see SIZES"
    timings = [b for b in row["baselines"] if b["status"] == "ok" and b["baseline"] != "null"]
    text = (
        _env()
        .get_template(f"{backend}.md.j2")
        .render(
            task=row,
            args=solution_args(row["source"]),
            level_name=LEVEL_NAMES.get(row["level"], "?"),
            full_size=full,
            hardware=hardware,
            timings=timings,
            fmt=fmt,
        )
    )
    return "\n".join(line.rstrip() for line in text.splitlines()).strip() + "\n"


def render_prompts(row: dict[str, Any], hardware: dict[str, Hardware]) -> dict[str, str]:
    """{backend: prompt}; the system section lists the hardware the task's baselines ran on."""
    tags = sorted({b["hardware"] for b in row["baselines"]})
    hw = [hardware[t] for t in tags if t in hardware]
    return {b: render_prompt(b, row, hw) for b in BACKENDS}
