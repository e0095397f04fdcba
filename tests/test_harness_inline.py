"""Inlining of repository-local helpers (scrapers/harness/inline.py) on a hand-written fake checkout."""
from __future__ import annotations

import json
from pathlib import Path

from generator.mined import mined_tasks
from scrapers.harness import driver
from scrapers.harness.inline import inline_candidate
from scrapers.harness.splice import apply
from scrapers.harness.render import prepare
from scrapers.harness.search import Budget

REPO = {
    "pkg/__init__.py": "from .ops import scale_sum\n",
    "pkg/consts.py": "FACTOR = 3.0\nOTHER = 7\n",
    "pkg/norm.py": """import torch

EPS = 1e-6


def _norm(x):
    return x / (x.abs().max() + EPS)
""",
    "pkg/ops.py": """import math

import torch
from pkg.consts import FACTOR
from .norm import _norm as normalize


def scale_sum(x):
    return normalize(x) * FACTOR + math.sqrt(4.0)


def unused(x):
    return x
""",
    "tests/unit/helpers.py": """import torch


def double(x):
    return x * 2
""",
    "pkg/gpu.py": """import fancy_gpu_lib


@fancy_gpu_lib.jit
def kernel(x):
    return x


def via_lib(x):
    return fancy_gpu_lib.op(x)
""",
}

CANDIDATES = {
    "reduce_scaled": """import torch
import torch.distributed as dist
from pkg import scale_sum


def reduce_scaled(x, group):
    y = scale_sum(x)
    dist.all_reduce(y, group=group)
    return y
""",
    "reduce_lib": """import torch
import torch.distributed as dist
from pkg.gpu import via_lib, kernel


def reduce_lib(x, group):
    if x.numel() < 0:
        return kernel(x)
    y = via_lib(x)
    dist.all_reduce(y, group=group)
    return y
""",
}


def _candidate(name: str) -> dict:
    return {"id": "c" + format(abs(hash(name)) % 16**15, "015x"), "schema": 1, "qualname": name, "entry": name,
            "kind": "function", "role": "library",
            "provenance": {"repo": "example/mined", "path": f"mined/{name}.py", "commit": "0" * 40,
                           "line_start": 1, "line_end": 9, "license": "MIT",
                           "url": f"https://github.com/example/mined/blob/{'0' * 40}/mined/{name}.py"},
            "params": [{"name": "x", "kind": "positional", "annotation": None, "default": None},
                       {"name": "group", "kind": "positional", "annotation": None, "default": None}],
            "docstring": None, "classification": {"realizations": [], "dims": [], "workload": None, "families": []},
            "unique": True, "license_permitted": True, "module_path": f"modules/{name}.py"}


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    src = tmp_path / "src" / "mined"
    for rel, text in REPO.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    scrape = tmp_path / "scrape"
    (scrape / "modules").mkdir(parents=True)
    with (scrape / "candidates.jsonl").open("w") as f:
        for name, text in CANDIDATES.items():
            (scrape / "modules" / f"{name}.py").write_text(text)
            f.write(json.dumps(_candidate(name)) + "\n")
    return tmp_path / "src", scrape


def test_transitive_helpers_are_inlined_with_their_spans(tmp_path):
    src, _ = _setup(tmp_path)
    rec = inline_candidate(_candidate("reduce_scaled"), CANDIDATES["reduce_scaled"], src / "mined")
    assert rec.names == ["scale_sum"] and not rec.skipped
    spans = {(s["path"], s["line_start"], s["line_end"]) for s in rec.spans}
    # re-export followed from pkg/__init__.py; constants and the aliased helper come along, `unused` does not
    assert spans == {("pkg/ops.py", 8, 9), ("pkg/consts.py", 1, 1), ("pkg/norm.py", 3, 3), ("pkg/norm.py", 6, 7)}
    assert "normalize = _norm" in rec.prelude and "def unused" not in rec.prelude and "OTHER" not in rec.prelude
    text = apply(CANDIDATES["reduce_scaled"], rec)
    assert "from pkg import" not in text and text.index("import torch.distributed") < text.index("def _norm")
    prep = prepare(text)
    assert not prep.missing and "import math" in prep.body


def test_script_style_import_of_a_test_helper_is_found_above_the_importing_file(tmp_path):
    src, _ = _setup(tmp_path)
    cand = _candidate("t")
    cand["provenance"]["path"] = "tests/unit/runtime/test_x.py"
    text = "import torch\nfrom unit.helpers import double\n\n\ndef t(x):\n    return double(x)\n"
    rec = inline_candidate(cand, text, src / "mined")
    assert rec.names == ["double"] and rec.spans[0]["path"] == "tests/unit/helpers.py"


def test_third_party_dependency_stays_missing_with_reason(tmp_path):
    src, _ = _setup(tmp_path)
    rec = inline_candidate(_candidate("reduce_lib"), CANDIDATES["reduce_lib"], src / "mined")
    # `kernel` needs the third-party decorator when it is defined: not inlined, the reason is kept
    assert "pkg.gpu.kernel" in rec.skipped and "fancy_gpu_lib" in rec.skipped["pkg.gpu.kernel"]
    assert rec.names == ["via_lib"]
    prep = prepare(apply(CANDIDATES["reduce_lib"], rec))
    assert "fancy_gpu_lib" in prep.missing and "pkg.gpu.kernel" in prep.missing


def test_inlined_candidate_is_accepted_and_rendered_with_provenance(tmp_path):
    src, scrape = _setup(tmp_path)
    fast = Budget(seconds=30, attempts=6, attempt_timeout_s=6, mem_mb=512)
    before = driver.run(scrape, tmp_path / "plain", budget=fast, quiet=True)
    plain = {r["qualname"] if "qualname" in r else r["id"]: r for r in map(json.loads, before.open())}
    assert all(not r["accepted"] and r["reason"].startswith("needs_import") for r in plain.values())
    dest = driver.run(scrape, tmp_path / "inl", budget=fast, quiet=True, src=src)
    res = {r["id"]: r for r in map(json.loads, dest.open())}
    ok, lib = res[_candidate("reduce_scaled")["id"]], res[_candidate("reduce_lib")["id"]]
    assert ok["accepted"] and ok["inline"]["names"] == ["scale_sum"], ok
    assert not lib["accepted"] and lib["reason"] == "needs_import: fancy_gpu_lib"
    assert "fancy_gpu_lib" in lib["inline_skipped"]["pkg.gpu.kernel"]
    out = tmp_path / "l4"
    (out / "tasks").mkdir(parents=True)
    records, paths = mined_tasks(out, scrape, dest, ungated=True)
    assert len(records) == 1
    pv = records[0].spec["provenance"]
    assert {(s["path"], s["line_start"]) for s in pv["inlined"]} >= {("pkg/norm.py", 6), ("pkg/ops.py", 8)}
    assert all(s["url"].startswith("https://github.com/example/mined/blob/" + "0" * 40) for s in pv["inlined"])
    task = paths[0].read_text()
    assert "# Repository helpers inlined from the same repository and commit:" in task
    assert "#   pkg/norm.py lines 6-7 (_norm)" in task and "def _norm(x):" in task
