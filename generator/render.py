"""Render task modules from jinja2 templates, with one-line errors naming the template."""

from __future__ import annotations

import pprint
from functools import lru_cache
from pathlib import Path

import jinja2

from mgbench.generator.spec import TaskSpec
from mgbench.templates import TEMPLATES_DIR


class RenderError(ValueError):
    """A template failed to render or rendered invalid Python; the message names the template."""


def _pyrepr(value: object) -> str:
    return pprint.pformat(value, width=100, sort_dicts=True)


@lru_cache(maxsize=4)
def environment(root: str = str(TEMPLATES_DIR)) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(Path(root) / "families"), root]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=False,
        autoescape=False,
    )
    env.filters["pyrepr"] = _pyrepr
    return env


def render_module(spec: TaskSpec, root: Path | str = TEMPLATES_DIR) -> str:
    """The Python source of one task module; raises RenderError naming the template on failure."""
    env = environment(str(root))
    ctx = {**spec.to_dict(), "p": spec.params}
    try:
        source = env.get_template(spec.template).render(**ctx)
    except jinja2.TemplateSyntaxError as e:
        raise RenderError(
            f"template {e.filename or e.name or spec.template} line {e.lineno}: jinja2 syntax error: {e.message}"
        ) from None
    except jinja2.TemplateNotFound as e:
        raise RenderError(f"template {spec.template}: not found ({e.name})") from None
    except jinja2.UndefinedError as e:
        raise RenderError(
            f"template {spec.template}: undefined variable while rendering {spec.task_id}: {e.message}"
        ) from None
    source = "\n".join(line.rstrip() for line in source.splitlines()).strip() + "\n"
    while "\n\n\n\n" in source:
        source = source.replace("\n\n\n\n", "\n\n\n")
    try:
        compile(source, f"{spec.task_id}.py", "exec")
    except SyntaxError as e:
        raise RenderError(
            f"template {spec.template}: rendered module {spec.task_id} has a Python "
            f"syntax error at line {e.lineno}: {e.msg}"
        ) from None
    return source
