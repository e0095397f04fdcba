"""Where mgbench's files are: the one module that knows how a checkout and an install are laid out.

In a checkout the pipeline's stage folders (dataset/, generator/, scrapers/, taxonomy/, templates/,
validation/) stand at the repository top beside mgbench/; installed, setuptools puts them inside the
mgbench package. Either way they import as `mgbench.<stage>` (mgbench/__init__.py maps a checkout's
folders). Standard library only."""

from __future__ import annotations

from pathlib import Path

# The pipeline stages, each one folder and one sub-package `mgbench.<stage>`.
STAGES = ("dataset", "generator", "scrapers", "taxonomy", "templates", "validation")

PACKAGE_DIR = Path(__file__).resolve().parent
# The folder on sys.path that holds the mgbench package: what a child process needs on its PYTHONPATH.
IMPORT_ROOT = PACKAGE_DIR.parent
# True when running from a checkout whose stage folders stand beside mgbench/ (not inside it).
IN_CHECKOUT = not (PACKAGE_DIR / "validation").is_dir() and (IMPORT_ROOT / "validation" / "__init__.py").is_file()
# Where the stage folders are.
STAGES_DIR = IMPORT_ROOT if IN_CHECKOUT else PACKAGE_DIR
# The repository's root (committed results/, docs/); None in an install, which ships neither.
REPO_ROOT: Path | None = IMPORT_ROOT if IN_CHECKOUT else None


def child_pythonpath(existing: str | None) -> str:
    """A PYTHONPATH for a child process that must import mgbench as this process does: the import root first."""
    import os

    return os.pathsep.join(filter(None, [str(IMPORT_ROOT), existing]))
