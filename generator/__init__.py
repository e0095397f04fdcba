"""Generator: taxonomy x templates x variants -> task modules + JSONL manifest. The CLI lives here."""

from mgbench.generator.generate import GenerateError, generate
from mgbench.generator.spec import TaskSpec, expand

__all__ = ["TaskSpec", "expand", "generate", "GenerateError"]
