"""Helpers of the dataset tests: a small generated task set with synthetic GPU results."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAMILIES = ["all_reduce", "gemm_rs", "ag_gemm"]
COMPILE_FAILS = "l2-gemm_rs-bf16"


def small_out(out: Path) -> Path:
    """OUT with bf16 tasks of a few level-1/2 families and results/<tag>/ from the fixture writer."""
    from mgbench.dataset.fixtures import write_fake_results
    from mgbench.generator import generate

    generate(out, families=FAMILIES, dtypes=["bf16"], check_import=False)
    write_fake_results(out / "results", out, compile_fails=[COMPILE_FAILS])
    return out


def child_env(**extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    env.update(extra)
    return env


def mgbench(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the real CLI in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "mgbench.cli", *args],
        capture_output=True,
        text=True,
        env=env or child_env(),
        timeout=timeout,
        cwd=str(REPO),
    )
