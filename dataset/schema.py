"""The explicit `datasets.Features` schema of an mgbench row."""
from __future__ import annotations

from datasets import Features, Sequence, Value

TOLERANCE = {"rtol": Value("float64"), "atol_rel": Value("float64")}
PROVENANCE = {"kind": Value("string"), "template": Value("string"), "repository": Value("string"),
              "path": Value("string"), "commit": Value("string"), "license": Value("string"),
              "url": Value("string")}
VALIDATION = {"world_size": Value("int32"), "backend": Value("string"), "size": Value("string"),
              "hardware": Value("string"), "status": Value("string"), "max_error": Value("float64"),
              "seconds": Value("float64")}

FEATURES = Features({
    "task_id": Value("string"),
    "name": Value("string"),
    "level": Value("int32"),
    "family": Value("string"),
    "variant": Value("string"),
    "scale": Value("string"),
    "dtype": Value("string"),
    "dims": Sequence(Value("string")),
    "plan": [{"dim": Value("string"), "size": Value("string")}],
    "workload": Value("string"),
    "collectives": Sequence(Value("string")),
    "world_sizes": Sequence(Value("int32")),
    "sizes": Value("string"),
    "description": Value("string"),
    "source": Value("string"),
    "content_hash": Value("string"),
    "tolerance": TOLERANCE,
    "provenance": PROVENANCE,
    "validation": [VALIDATION],
})
