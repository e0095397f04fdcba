"""Render the dataset card (README.md with YAML front matter) from the rows."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import yaml

from dataset.schema import FEATURES


def features_yaml(indent: int = 2) -> str:
    info = FEATURES._to_yaml_list()
    text = yaml.safe_dump(info, sort_keys=False)
    return "\n".join(" " * indent + line for line in text.splitlines())


def render_card(rows: list[dict[str, Any]], counts: dict[str, int]) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).parent)),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.get_template("card.md.j2").render(counts=counts, total=len(rows), features_yaml=features_yaml())
