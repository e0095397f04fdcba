"""Inlining (scrapers/harness/make/inline.py) when the candidate and a repository helper import one torch
object under different paths (torch re-exports: `torch.distributed.Work` is
`torch.distributed.distributed_c10d.Work`): the helper is inlined, not stopped by a name collision; two
different objects under one name still are a collision."""

from __future__ import annotations

import pytest

from mgbench.scrapers.harness.make.inline import import_key, inline_candidate
from tests.harness.helpers import _candidate

# (the candidate's import, the helper file's import of the same object): pairs met in mined repositories
SAME_OBJECT = [
    ("from torch.distributed import Work", "from torch.distributed.distributed_c10d import Work"),
    ("from torch.distributed import DeviceMesh", "from torch.distributed.device_mesh import DeviceMesh"),
    ("from torch.distributed import ReduceOp", "from torch.distributed.distributed_c10d import ReduceOp"),
    ("from torch.nn import Module", "from torch.nn.modules import Module"),
]

HELPER = "{imp}\n\n\ndef wait_all(works):\n    return [w for w in works if isinstance(w, {name})]\n"
CANDIDATE = (
    "import torch\n{imp}\nfrom pkg.comm import wait_all\n\n\n"
    "def step(x, works):\n    assert {name} is not None\n    return wait_all(works), x\n"
)


def _repo(tmp_path, helper_import: str, name: str):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "comm.py").write_text(HELPER.format(imp=helper_import, name=name))
    return tmp_path


@pytest.mark.parametrize("mine,theirs", SAME_OBJECT)
def test_one_torch_object_under_two_paths_is_no_name_collision(tmp_path, mine, theirs):
    name = mine.split()[-1]
    root = _repo(tmp_path, theirs, name)
    rec = inline_candidate(_candidate("step"), CANDIDATE.format(imp=mine, name=name), root)
    assert rec.names == ["wait_all"] and not rec.skipped
    assert import_key(*mine.split()[1::2]) == import_key(*theirs.split()[1::2])


def test_two_objects_bound_to_one_name_still_collide(tmp_path):
    """The helper's `Work` is torch's, the candidate's `Work` a different class: inlining stops, with why."""
    root = _repo(tmp_path, "from torch.distributed import Work", "Work")
    text = CANDIDATE.format(imp="from torch.futures import Future as Work", name="Work")
    rec = inline_candidate(_candidate("step"), text, root)
    assert rec.names == [] and "name collision: Work" in rec.skipped["pkg.comm.wait_all"]


def test_a_name_torch_lacks_keeps_its_spelled_path():
    assert import_key("torch.distributed", "no_such_thing") == "import torch.distributed.no_such_thing"
    assert import_key("torch", "float32") == "import torch.float32"  # a value: no defining module
