"""Generator: taxonomy x templates x variants -> task modules + JSONL manifest. The CLI lives here."""
from generator.spec import TaskSpec, expand
from generator.generate import GenerateError, generate

__all__ = ["TaskSpec", "expand", "generate", "GenerateError"]
