"""Inspect's entry point ([project.entry-points.inspect_ai] in pyproject.toml): importing this module
registers the task `mgbench/mgbench` and the offline model provider `mgbench_scripted/...`."""

# ruff: noqa: F401
from mgbench.inspect_eval.scripted import ScriptedModel
from mgbench.inspect_eval.task import mgbench
