"""A taxonomy folder for tests that edit it: the base files, the peer lists and a chosen subset of
the family files (other families change while these tests pin behaviour of a stable subset)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mgbench.taxonomy import TaxonomyError, load_taxonomy
from mgbench.taxonomy.loader import TAXONOMY_DIR

BASE_FILES = ("dims.yaml", "workloads.yaml", "realizations.yaml", "compositions.yaml", "tradeoffs.yaml")


def copy_taxonomy(tmp_path: Path, family_files: tuple[str, ...]) -> Path:
    root = tmp_path / "taxonomy"
    (root / "families").mkdir(parents=True)
    for name in BASE_FILES:
        shutil.copy(TAXONOMY_DIR / name, root / name)
    for name in family_files:
        shutil.copy(TAXONOMY_DIR / "families" / name, root / "families" / name)
    shutil.copytree(TAXONOMY_DIR / "peers", root / "peers")
    return root


def load_error(root: Path, file: str, old: str, new: str) -> str:
    """Edit `file` of the copied taxonomy (`old` -> `new`, once) and return the loader's error: one line
    that names the file."""
    path = root / file
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(TaxonomyError) as e:
        load_taxonomy(root)
    msg = str(e.value)
    assert "\n" not in msg and file.split("/")[-1] in msg, msg
    return msg
