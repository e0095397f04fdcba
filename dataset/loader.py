"""Load mgbench tasks for evaluation: `load_tasks(name_or_folder)` -> [Task].

    from mgbench.dataset.loader import load_tasks
    tasks = load_tasks("path/to/dataset", split="level1")     # or a Hub id; split=None: all
    t = tasks[0]
    path = t.write("work/")           # work/<task_id>.py, checked against content_hash
    t.check_import()                  # imported in a child process, contract checked
    res = t.run_in_child(world_size=2, size="smoke")   # validated on gloo rank processes
    assert res.status == "passed"

A task module is untrusted code from the caller's point of view: it is only ever imported in
child processes (the import check, or the rank processes of a validation pool).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mgbench.paths import child_pythonpath
from mgbench.store import MANIFEST_NAME, write_manifest


class TaskError(RuntimeError):
    """A task's module is corrupt or does not import in a child process."""


@dataclass
class Task:
    """One dataset row, with helpers to put its module on disk and run it in child processes."""

    task_id: str
    level: int
    family: str
    dtype: str
    world_sizes: list[int]
    source: str
    content_hash: str
    tolerance: dict[str, float | None]
    prompt: dict[str, str]
    row: dict[str, Any] = field(repr=False)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Task:
        return cls(
            row["task_id"],
            row["level"],
            row["family"],
            row["dtype"],
            list(row["world_sizes"]),
            row["source"],
            row["content_hash"],
            dict(row["tolerance"]),
            dict(row["prompt"]),
            row,
        )

    @property
    def sizes(self) -> dict[str, dict[str, Any]]:
        return json.loads(self.row["sizes"])

    def write(self, directory: Path | str) -> Path:
        """Write the module to directory/<task_id>.py (verified against content_hash); its path."""
        if hashlib.sha256(self.source.encode()).hexdigest() != self.content_hash:
            raise TaskError(f"{self.task_id}: source does not match its content_hash")
        path = Path(directory) / f"{self.task_id}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.source)
        return path

    def check_import(self, timeout: float = 120.0) -> Path:
        """Import the module in a child process and check the contract's names; raise TaskError if not."""
        with tempfile.TemporaryDirectory(prefix="mgbench-task-") as tmp:
            path = self.write(tmp)
            args = [sys.executable, "-m", "mgbench.validation.importcheck", str(path)]
            if self.level != 4:
                args.append("--oracle")
            env = {
                **os.environ,
                "PYTHONPATH": child_pythonpath(os.environ.get("PYTHONPATH")),
            }
            try:
                proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
            except subprocess.TimeoutExpired:
                raise TaskError(f"{self.task_id}: import did not finish in {timeout:.0f}s") from None
            if proc.returncode:
                lines = [json.loads(x)["error"] for x in proc.stdout.splitlines() if x.startswith("{")]
                why = lines[0] if lines else (proc.stderr.strip().splitlines() or ["unknown error"])[-1]
                raise TaskError(f"{self.task_id}: import check failed: {why}")
            return path

    def run_in_child(
        self, world_size: int = 2, size: str = "smoke", backend: str = "gloo", timeout: float = 120.0, seed: int = 0
    ) -> Any:
        """Validate the reference on `world_size` rank processes; a mgbench.validation.run.ValidationResult."""
        from mgbench.validation.run import validate

        with tempfile.TemporaryDirectory(prefix="mgbench-run-") as tmp:
            self.write(tmp)
            rec = {
                "task_id": self.task_id,
                "content_hash": self.content_hash,
                "level": self.level,
                "module": f"{self.task_id}.py",
                "world_sizes": self.world_sizes,
            }
            write_manifest(Path(tmp) / MANIFEST_NAME, [rec])
            results = validate(
                tmp,
                Path(tmp) / "results.jsonl",
                world_sizes=[world_size],
                backend=backend,
                size=size,
                timeout_s=timeout,
                seed=seed,
                quiet=True,
            )
        if not results:
            raise TaskError(f"{self.task_id}: world size {world_size} not supported (supports {self.world_sizes})")
        return results[0]


def load_tasks(
    name_or_folder: str | Path,
    split: str | None = None,
    config: str | None = None,
    revision: str | None = None,
    **kwargs: Any,
) -> list[Task]:
    """Tasks of a dataset folder or Hub id via datasets.load_dataset; split None gives every split."""
    import datasets

    ds = datasets.load_dataset(str(name_or_folder), config, split=split, revision=revision, **kwargs)
    parts = [ds] if isinstance(ds, datasets.Dataset) else [ds[s] for s in ds]
    return [Task.from_row(row) for part in parts for row in part]
