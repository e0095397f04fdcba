"""`mgbench scrape local` on a checkout of a pinned repository honours the pin's `subdirs` (as the
GitHub flow does): a huge repository scanned locally is scanned where the sources file says."""

from __future__ import annotations

import json

from mgbench.cli import main

COLL = "import torch.distributed as dist\n\n\ndef {name}(x):\n    dist.all_reduce(x)\n    return x\n"


def _sources(tmp_path, subdirs: str) -> str:
    path = tmp_path / "sources.yaml"
    path.write_text(f"repositories:\n  - repo: big/engine\n    commit: {'a' * 40}\n    license: MIT\n{subdirs}")
    return str(path)


def _tree(tmp_path):
    root = tmp_path / "engine"
    for rel, name in [("engine/distributed/comm.py", "reduce_tp"), ("tests/test_comm.py", "check_reduce")]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(COLL.format(name=name))
    return root


def _scrape(tmp_path, sources: str, rc: int = 0) -> list[dict]:
    out = tmp_path / "out"
    argv = ["scrape", "local", str(_tree(tmp_path)), "--repo", "big/engine", "--out", str(out)]
    assert main([*argv, "--sources", sources, "--quiet", "--no-kernels"]) == rc
    return [json.loads(x) for x in (out / "candidates.jsonl").read_text().splitlines()] if rc == 0 else []


def test_local_scan_of_a_pinned_checkout_stays_in_its_subdirs(tmp_path):
    cands = _scrape(tmp_path, _sources(tmp_path, "    subdirs: [engine/distributed, csrc]\n"))
    assert [(c["provenance"]["path"], c["qualname"]) for c in cands] == [("engine/distributed/comm.py", "reduce_tp")]
    assert cands[0]["provenance"]["license"] == "MIT"


def test_local_scan_without_subdirs_covers_the_whole_checkout(tmp_path):
    cands = _scrape(tmp_path, _sources(tmp_path, ""))
    assert sorted(c["qualname"] for c in cands) == ["check_reduce", "reduce_tp"]


def test_pinned_subdirs_absent_from_the_checkout_are_a_clear_error(tmp_path, capsys):
    _scrape(tmp_path, _sources(tmp_path, "    subdirs: [python/engine]\n"), rc=2)
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith("engine: none of big/engine's pinned subdirs ['python/engine'] is there")
    assert not (tmp_path / "out" / "candidates.jsonl").exists()
