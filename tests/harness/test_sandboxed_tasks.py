"""End-to-end: accepted harnesses become level-4 task modules (driver.run) that validate, regenerate
byte-identically and carry their inlined provenance."""

from __future__ import annotations

import json

import pytest

from mgbench.generator.generate import generate
from mgbench.generator.mined import mined_tasks
from mgbench.scrapers.harness import driver
from mgbench.scrapers.harness.driver import report, run
from mgbench.scrapers.harness.inputs.search import Budget
from mgbench.scrapers.harness.run.crosscheck import agree
from mgbench.validation.contract import check_contract
from mgbench.validation.run import validate
from tests.harness.helpers import FAST_12 as FAST
from tests.harness.helpers import _candidate, _setup, scrape_folder

pytestmark = pytest.mark.sandboxed  # runs candidates or tasks through child rank processes


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


def test_prelude_that_raises_when_loaded_is_dropped(tmp_path):
    """An inlined helper whose module raises at load on this platform (Triton-distributed's `if is_cuda():
    ... else: raise Exception("either CUDA or HIP platform is supported")`) would reject a candidate that never
    calls it: the search is repeated without the prelude, and the reason is kept."""
    import json

    from mgbench.scrapers.harness import driver
    from tests.harness.helpers import _candidate

    src = tmp_path / "src" / "mined" / "pkg"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "plat.py").write_text(
        'import shutil\n\nif shutil.which("no-such-smi-mgbench"):\n    BACKEND = "gpu"\n'
        'else:\n    raise Exception("either CUDA or HIP platform is supported")\n\n\n'
        "def finalize():\n    return BACKEND\n"
    )
    scrape = tmp_path / "scrape"
    (scrape / "modules").mkdir(parents=True)
    text = (
        "import torch\nimport torch.distributed as dist\nfrom pkg.plat import finalize\n\n\n"
        "def reduce_twice(x, group):\n    dist.all_reduce(x, group=group)\n    return x * 2\n\n\n"
        "if __name__ == '__main__':\n    finalize()\n"
    )
    (scrape / "modules" / "reduce_twice.py").write_text(text)
    (scrape / "candidates.jsonl").write_text(json.dumps(_candidate("reduce_twice")) + "\n")
    dest = driver.run(scrape, tmp_path / "out", budget=FAST, quiet=True, src=tmp_path / "src")
    res = json.loads(dest.read_text().splitlines()[-1])
    assert res["accepted"], res
    assert "inline" not in res and "prelude failed to load" in res["inline_skipped"]["*"]
    assert "either CUDA or HIP" in res["inline_skipped"]["*"]


def test_mined_tasks_render_validate_and_report(tmp_path):
    scrape = scrape_folder(tmp_path / "scrape", ["grad_allreduce", "gather_out", "writes"])
    run(scrape, budget=Budget(seconds=30, attempts=8, attempt_timeout_s=6, mem_mb=512), quiet=True)
    recs = [json.loads(x) for x in (scrape / "harness.jsonl").read_text().splitlines()]
    assert sorted(r["accepted"] for r in recs) == [False, True, True]
    text = report(scrape)
    assert "| example/mined | 3 | 3 | 2 | 67% |" in text and "sandbox_violation" in text

    out = tmp_path / "out"
    records, _ = generate(out, levels=[4], mined=scrape, mined_ungated=True)
    assert len(records) == 2 and all(r.spec["level"] == 4 for r in records)
    src = (out / records[0].module).read_text()
    assert "License: MIT" in src and "https://github.com/example/mined/blob/" in src and "lines 1-" in src
    assert "import scrapers" not in src and "def make_inputs(" in src and "def solution(" in src
    manifest = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert {m["provenance"]["repository"] for m in manifest} == {"example/mined"}

    results = validate(out, out / "results.jsonl", world_sizes=[2], quiet=True)
    assert [r.status for r in results] == ["passed", "passed"], [r.reason for r in results]
    for r in results:
        assert r.checks["matches_oracle"] is None
        assert r.checks["rejects_zeros"] and r.checks["rejects_other_seed"] and r.checks["rejects_echo_inputs"]

    # gloo fingerprints recorded for the NCCL comparison; a perturbed one disagrees
    fp = manifest[0]["harness_fingerprints"]["ws2"][0]
    assert agree(fp, dict(fp))[0]
    assert not agree(fp, {**fp, "sum": fp["sum"] + 1.0 + abs(fp["sum"])})[0]


def test_regenerate_is_byte_identical(tmp_path):
    scrape = scrape_folder(tmp_path / "scrape", ["grad_allreduce"])
    run(scrape, budget=Budget(seconds=30, attempts=8, attempt_timeout_s=6, mem_mb=512), quiet=True)
    out = tmp_path / "out"
    first, _ = generate(out, levels=[4], mined=scrape, mined_ungated=True)
    second, _ = generate(out, levels=[4], mined=scrape, mined_ungated=True)
    assert [r.content_hash for r in first] == [r.content_hash for r in second]
    from mgbench.validation.contract import load_module

    check_contract(load_module(out / first[0].module), "mined")
