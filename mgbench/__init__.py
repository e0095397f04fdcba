"""mgbench: one installed name for the whole pipeline.

The stages import as `mgbench.dataset`, `mgbench.generator`, `mgbench.scrapers`, `mgbench.taxonomy`,
`mgbench.templates` and `mgbench.validation`. Installed, they are folders inside this package; in a
checkout they stand at the repository top (the layout the design fixes), and the finder below maps
`mgbench.<stage>` to them, so `PYTHONPATH=. python -m mgbench.cli ...` runs without installing.

Also here: store.py (the file formats every stage shares), the vocabulary they share (distops.py, the
torch.distributed op table; dtypes.py; taskfilter.py, the one task filter), report.py (progress lines and
tables), paths.py (where those folders are), cli.py (the `mgbench` command), inspect_eval/ (the Inspect
AI task, which needs the `inspect` extra) and rl/ (training: the reward, the reward service, the `verifiers`
environment and a TRL reward function; the environment needs the `rl` extra).
Importing this package imports the standard library only."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

from mgbench import paths


class _CheckoutStages(importlib.abc.MetaPathFinder):
    """Finds `mgbench.<stage>` in a checkout's top-level stage folder; every deeper module follows from the
    stage package's __path__ by Python's own path finder."""

    def find_spec(self, fullname, path=None, target=None):
        parent, _, stage = fullname.partition(".")
        if parent != "mgbench" or stage not in paths.STAGES:
            return None
        folder = paths.STAGES_DIR / stage
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


if paths.IN_CHECKOUT and not any(isinstance(f, _CheckoutStages) for f in sys.meta_path):
    sys.meta_path.insert(0, _CheckoutStages())


# The `verifiers` library loads an environment by id: the id `mgbench` (or `<owner>/mgbench[@version]`) imports
# this package and takes the Taskset, Env and Harness classes that __all__ names. They live in
# mgbench/rl/environment.py and are imported on first access only (docs/train.md).
__all__ = ["MgbenchTaskset", "MgbenchEnv", "MgbenchHarness"]


def __getattr__(name: str):
    if name in __all__:
        from mgbench.rl import environment

        return getattr(environment, name)
    raise AttributeError(f"module 'mgbench' has no attribute {name!r}")
