"""Generator: taxonomy x templates x variants -> task modules + JSONL manifest. The CLI lives here."""

from generator.generate import GenerateError, generate
from generator.spec import TaskSpec, expand

__all__ = ["TaskSpec", "expand", "generate", "GenerateError"]
