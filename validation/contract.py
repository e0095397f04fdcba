"""The task-module contract: load a module from a file and check the names it must define."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

REQUIRED = ("solution", "make_inputs", "SIZES")
REQUIRED_SIZES = ("smoke", "full")


class ContractError(ValueError):
    """A task module breaks the contract; the message names the module and what is wrong."""


def require_size_class(size: str, sizes_by_task: Mapping[str, Mapping | None], source: str) -> None:
    """Bad input (ValueError, one line) when a task of `sizes_by_task` ({task id: its SIZES}) lacks the size
    class `size`, before anything runs: a mistyped --size would otherwise fail every task and leave a failure
    record per task behind. A task whose size classes are unknown (None or empty) is not checked."""
    lacking = sorted(tid for tid, sizes in sizes_by_task.items() if sizes and size not in sizes)
    if lacking:
        offered = sorted({k for tid in lacking for k in sizes_by_task[tid] or {}})
        raise ValueError(
            f"{source}: {len(lacking)} task(s) have no size class {size!r} (e.g. {lacking[0]}; "
            f"they offer {', '.join(offered)}): pass --size {' or '.join(REQUIRED_SIZES)}"
        )


def load_module(path: str | Path, name: str | None = None) -> ModuleType:
    """Import a module from `path` under a unique name (never into the package namespace)."""
    path = Path(path)
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
    modname = name or f"mgbench_task_{path.stem.replace('-', '_').replace('.', '_')}_{digest}"
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise ContractError(f"{path}: cannot be loaded as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    spec.loader.exec_module(mod)
    return mod


def check_contract(mod: ModuleType, where: str, need_oracle: bool = False) -> None:
    """Raise ContractError unless `mod` defines the contract's names with the right kinds."""
    for name in REQUIRED + (("oracle",) if need_oracle else ()):
        if not hasattr(mod, name):
            raise ContractError(f"{where}: missing '{name}'")
    for name in ("solution", "make_inputs") + (("oracle",) if need_oracle else ()):
        if not callable(getattr(mod, name)):
            raise ContractError(f"{where}: '{name}' is not callable")
    sizes = mod.SIZES
    if not isinstance(sizes, dict) or any(k not in sizes for k in REQUIRED_SIZES):
        raise ContractError(f"{where}: SIZES must be a dict with at least {list(REQUIRED_SIZES)}")
