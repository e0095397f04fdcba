"""`mgbench scrape gaps`: mined patterns no family covers, ranked by how many repositories show them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mgbench.scrapers.classify import TaxonomyIds, load_ids
from mgbench.scrapers.gaps import covering_families, gap_clusters

ROOT = Path(__file__).resolve().parent.parent


def _cand(
    repo: str,
    qualname: str,
    dims: list[str],
    workload: str,
    reals: list[str],
    role: str = "library",
    path: str = "pkg/mod.py",
) -> dict:
    return {
        "unique": True,
        "license_permitted": True,
        "role": role,
        "qualname": qualname,
        "provenance": {"repo": repo, "path": path},
        "classification": {
            "dims": [{"id": d} for d in dims],
            "workload": {"id": workload},
            "realizations": [{"id": r} for r in reals],
        },
    }


TAX = TaxonomyIds(
    dims={"tensor", "pipeline", "expert"},
    workloads={"gemm", "moe", "collective"},
    realizations={"all_reduce", "send_recv", "all_to_all"},
    families=[
        {"id": "gemm_ar", "workload": "gemm", "realization": ["all_reduce"], "dims": ["tensor"]},
        {"id": "all_reduce", "workload": "collective", "realization": ["all_reduce"], "dims": []},
    ],
)


def test_coverage_needs_workload_realizations_and_a_shared_dim():
    assert covering_families(["tensor"], "gemm", ["all_reduce", "send_recv"], TAX) == ["gemm_ar"]
    assert covering_families(["pipeline"], "gemm", ["all_reduce"], TAX) == []  # no shared dim
    assert covering_families(["tensor"], "gemm", ["send_recv"], TAX) == []  # other collective
    assert covering_families(["collective"], "gemm", ["all_reduce"], TAX) == ["gemm_ar"]
    assert covering_families(["expert"], "collective", ["all_reduce"], TAX) == ["all_reduce"]  # a primitive


def test_patterns_rank_by_repositories_then_library_candidates():
    cands = [
        _cand("a/x", "gemm_ar_fwd", ["tensor"], "gemm", ["all_reduce"]),  # covered
        *[_cand("a/x", f"send_act_{i}", ["pipeline"], "gemm", ["send_recv"]) for i in range(3)],
        _cand(
            "a/x",
            "Dispatcher.dispatch_tokens",
            ["expert"],
            "moe",
            ["all_to_all"],
            role="test",
            path="tests/test_moe.py",
        ),
        _cand("b/y", "MoE.dispatch_tokens", ["expert"], "moe", ["all_to_all"]),
        {"unique": False, "license_permitted": True, "classification": None},
    ]  # not considered
    clusters, considered, covered = gap_clusters(cands, TAX)
    assert (considered, covered) == (6, 1)
    assert [c.signature for c in clusters] == ["expert x moe via all_to_all", "pipeline x gemm via send_recv"]
    moe = clusters[0]
    assert (moe.repos, moe.library, moe.candidates) == (["a/x", "b/y"], 1, 2)
    assert moe.examples[0] == "b/y:pkg/mod.py:MoE.dispatch_tokens" and moe.examples[1].startswith("~a/x:tests/")
    assert "dispatch" in moe.name_words and "tokens" in moe.name_words


def test_a_family_added_later_counts_as_coverage():
    cand = _cand("a/x", "send_act", ["pipeline"], "gemm", ["send_recv"])
    assert gap_clusters([cand], TAX)[0]
    later = TaxonomyIds(
        TAX.dims,
        TAX.workloads,
        TAX.realizations,
        TAX.families + [{"id": "pp_gemm", "workload": "gemm", "realization": ["send_recv"], "dims": ["pipeline"]}],
    )
    assert gap_clusters([cand], later)[0] == []


def test_the_real_taxonomy_covers_a_tensor_parallel_all_reduce_gemm():
    assert "gemm_ar" in covering_families(["tensor"], "gemm", ["all_reduce"], load_ids())


def _gaps_cli(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mgbench.cli", "scrape", "gaps", "--out", str(out), *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_cli_prints_the_ranking_and_writes_json(tmp_path):
    (tmp_path / "candidates.jsonl").write_text(
        "\n".join(json.dumps(_cand(r, "send_act", ["pipeline"], "gemm", ["send_recv"])) for r in ("a/x", "b/y")) + "\n"
    )
    proc = _gaps_cli(tmp_path, "--json", str(tmp_path / "gaps.json"))
    assert proc.returncode == 0, proc.stderr
    assert "pipeline x gemm via send_recv" in proc.stdout and "2 in 1 uncovered patterns" in proc.stdout
    data = json.loads((tmp_path / "gaps.json").read_text())
    assert data["clusters"][0]["repos"] == ["a/x", "b/y"]


def test_cli_bad_line_or_missing_file_is_one_line_with_exit_2(tmp_path):
    proc = _gaps_cli(tmp_path)
    assert proc.returncode == 2 and "candidates.jsonl: no scrape results here" in proc.stderr
    (tmp_path / "candidates.jsonl").write_text('{"unique": true}\n{not json\n')
    proc = _gaps_cli(tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert "candidates.jsonl:2: not a JSON line" in proc.stderr
