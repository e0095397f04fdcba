"""The level-4 gate: traced task modules (written here) pass or fail the right gate with its reason;
duplicates keep one, test copies ship only as the only copy of a pattern; generate ships only gated
tasks; the report's funnel adds up."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mgbench.scrapers.level4 import gate as G
from mgbench.scrapers.level4.funnel import funnel, funnel_table
from mgbench.scrapers.level4.select import decide, write_decisions
from mgbench.scrapers.level4.trace import TraceTarget, trace_tasks

TASK = """
import torch
import torch.distributed as dist
# variant {variant}

SIZES = {{"smoke": {{"n": 4}}, "full": {{"n": {n}}}}}


def make_inputs(rank, world_size, *, seed, device, size="full"):
    g = torch.Generator().manual_seed(seed * 31 + rank)
    n = SIZES[size]["n"]
    return (torch.randn(n, n, generator=g), torch.randn(n, n, generator=g))


def solution(x, w):
{body}
"""
BODIES = {
    "gemm_all_reduce": "    y = x @ w\n    dist.all_reduce(y)\n    return y",
    "all_reduce_wrapper": "    y = x.clone()\n    dist.all_reduce(y)\n    return y",
    "gemm_all_gather": "    y = x @ w\n    out = torch.empty(2 * y.shape[0], y.shape[1])\n"
    "    dist.all_gather_into_tensor(out, y)\n    return out",
    "gemm_only": "    return x @ w",
}
# task id -> (body, n, repository path): 512^3 products pass min_work (2^28 FLOPs), n = 8 does not
TASKS = {
    "lib_gemm_ar": ("gemm_all_reduce", 512, "megatron/core/tensor_parallel/layers.py"),
    "lib_gemm_ar_copy": ("gemm_all_reduce", 512, "megatron/core/legacy/tensor_parallel/layers_copy.py"),
    "test_gemm_ar": ("gemm_all_reduce", 512, "tests/unit_tests/test_layers.py"),
    "test_gemm_ag": ("gemm_all_gather", 512, "tests/unit_tests/test_gather.py"),
    # the same pattern at another shape (another signature), in an example: a second copy of one problem
    "example_gemm_ag": ("gemm_all_gather", 1024, "examples/distributed/gather_gemm_demo.py"),
    "lib_ar_wrapper": ("all_reduce_wrapper", 512, "megatron/core/utils.py"),
    "lib_tiny": ("gemm_all_reduce", 8, "megatron/core/small.py"),
    "lib_no_comm": ("gemm_only", 512, "megatron/core/dense.py"),
}


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, G.GateItem]:
    """Every task of TASKS traced at full size on 2 gloo ranks (one pool), as gate items."""
    root = tmp_path_factory.mktemp("gate")
    targets, items = [], {}
    for tid, (body, n, repo_path) in TASKS.items():
        path = root / f"{tid}.py"
        path.write_text(textwrap.dedent(TASK.format(variant=tid, n=n, body=BODIES[body])))
        targets.append(TraceTarget(tid, f"h-{tid}", str(path), f"c-{tid}", "owner/repo"))
        items[tid] = G.GateItem(tid, f"c-{tid}", f"h-{tid}", "owner/repo", repo_path)
    recs = trace_tasks(targets, root / "trace.jsonl", timeout_s=90)
    for tid, it in items.items():
        it.trace = recs[f"h-{tid}"]
        assert it.trace["status"] == "ok", it.trace["reason"]
    return items


@pytest.fixture(scope="module")
def decided(traced: dict[str, G.GateItem]) -> dict[str, Any]:
    ctx = G.GateContext(G.level1_realizations())
    return {d.task_id: d for d in decide(traced.values(), ctx)}


def test_real_work_ships(decided: dict[str, Any]) -> None:
    d = decided["lib_gemm_ar"]
    assert d.passed and d.failed_gate == "" and set(d.gates) == set(G.GATE_NAMES)
    assert all(v is None for v in d.gates.values()) and d.tags == []


def test_single_collective_wrapper_duplicates_a_level1_primitive(decided: dict[str, Any]) -> None:
    d = decided["lib_ar_wrapper"]  # 1 MiB all-reduce: enough bytes, but no compute
    assert d.gates["min_work"] is None
    assert not d.passed and d.failed_gate == "has_compute_or_real_comm"
    assert "single-collective wrapper (all_reduce)" in d.reason and "level-1 family all_reduce" in d.reason


def test_tiny_and_non_communicating_tasks_fail_their_gates(decided: dict[str, Any]) -> None:
    assert decided["lib_tiny"].failed_gate == "min_work" and "too little work" in decided["lib_tiny"].reason
    assert decided["lib_no_comm"].failed_gate == "communicates"


def test_duplicates_keep_the_shortest_library_path(decided: dict[str, Any]) -> None:
    kept, copy = decided["lib_gemm_ar"], decided["lib_gemm_ar_copy"]
    assert kept.signature == copy.signature and kept.passed
    assert not copy.passed and copy.failed_gate == "not_duplicate" and "lib_gemm_ar (kept)" in copy.reason


def test_test_copy_of_a_library_pattern_is_rejected_and_an_only_copy_is_tagged(decided: dict[str, Any]) -> None:
    assert decided["test_gemm_ar"].failed_gate == "library_code"
    only = decided["test_gemm_ag"]
    assert only.passed and only.tags == ["non_library"]


def test_of_several_non_library_copies_of_a_pattern_one_ships(decided: dict[str, Any]) -> None:
    kept, other = decided["test_gemm_ag"], decided["example_gemm_ag"]
    assert kept.pattern == other.pattern and kept.signature != other.signature
    assert kept.passed and not other.passed and other.failed_gate == "library_code"
    assert "another test/example copy of its pattern ships (test_gemm_ag)" in other.reason


def test_gpu_record_under_overhead_rejects(traced: dict[str, G.GateItem]) -> None:
    ctx = G.GateContext(G.level1_realizations())
    slow = G.GateItem(**{**traced["lib_gemm_ar"].__dict__, "gpu_ms": 0.5})
    fast = G.GateItem(**{**traced["lib_gemm_ar"].__dict__, "gpu_ms": 0.01})
    assert G.check_task(slow, ctx)["gpu_time"] is None
    assert "launch and host overhead" in G.check_task(fast, ctx)["gpu_time"]


def _rank(**kw: Any) -> dict[str, Any]:
    base = {
        "ops": {"c10d.allreduce_": 1},
        "mm_flops": 0,
        "elementwise_flops": 0,
        "moved_bytes": 0,
        "comm_bytes": 0,
        "comm_elems": 0,
        "collective_calls": 1,
        "collectives": [["allreduce_", "float32", [[4]]]],
        "inputs": [],
        "outputs": [],
    }
    return {**base, **kw}


def _item(tid: str, repo: str = "o/r", path: str = "pkg/mod.py", **rank: Any) -> G.GateItem:
    trace = {"status": "ok", "reason": "", "world_size": 2, "ranks": [_rank(**rank), _rank(**rank)]}
    return G.GateItem(tid, f"c-{tid}", f"h-{tid}", repo, path, trace=trace)


@given(st.integers(min_value=0, max_value=1 << 24))
def test_min_work_threshold_on_bytes_communicated(nbytes: int) -> None:
    got = G.check_task(_item("t", comm_bytes=nbytes, mm_flops=1), G.GateContext())["min_work"]
    assert (got is None) == (nbytes >= G.MIN_COMM_BYTES)


@pytest.mark.parametrize(
    "path,role,library",
    [
        ("megatron/core/tensor_parallel/mappings.py", "", True),
        ("tests/unit_tests/test_mappings.py", "", False),
        ("colossalai/shardformer/test_utils.py", "", False),
        ("examples/llama/train.py", "", False),
        ("benchmarks/comm.py", "", False),
        ("docs/source/snippet.py", "", False),
        ("deepspeed/comm/comm.py", "test", False),  # the harness saw it called only from tests
        ("python/triton_dist/kernels/allgather_gemm.py", "", True),
    ],
)
def test_library_paths(path: str, role: str, library: bool) -> None:
    assert G.is_library_path(path, role) is library


def test_untraced_task_does_not_ship() -> None:
    item = G.GateItem("t", "c-t", "h-t", "o/r", "pkg/m.py")
    (d,) = decide([item], G.GateContext())
    assert not d.passed and d.failed_gate == "traced" and "scrape gate" in d.reason


def _scrape_folder(root: Path, cands: list[tuple[str, str]], accepted: set[str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    with (root / "candidates.jsonl").open("w") as f:
        for cid, repo in cands:
            f.write(
                json.dumps(
                    {
                        "id": cid,
                        "unique": True,
                        "license_permitted": True,
                        "classification": None,
                        "provenance": {"repo": repo},
                    }
                )
                + "\n"
            )
    with (root / "harness.jsonl").open("w") as f:
        for cid, _ in cands:
            f.write(
                json.dumps({"id": cid, "accepted": cid in accepted, "spec": {"args": []} if cid in accepted else None})
                + "\n"
            )
    return root


def test_report_funnel_adds_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = {"mm_flops": G.MIN_MM_FLOPS, "comm_bytes": 64}
    items = [
        _item("a1", "o/a", **big),  # ships
        _item("a2", "o/a", path="pkg/longer/copy.py", **big),  # duplicate of a1
        _item("a3", "o/a", comm_bytes=8),  # min_work
        _item("b1", "o/b", path="tests/test_x.py", **big),  # library copy exists
        _item("b2", "o/b", comm_bytes=G.MIN_COMM_BYTES, comm_elems=G.MIN_COMM_BYTES // 4),
    ]  # wrapper
    decisions = decide(items, G.GateContext({"all_reduce": "all_reduce"}))
    cands = [(i.candidate, i.repo) for i in items] + [("c-x", "o/a"), ("c-y", "o/b"), ("c-z", "o/b")]
    scrape = _scrape_folder(tmp_path / "scrape", cands, {i.candidate for i in items} | {"c-x"})
    write_decisions(scrape / "gate.jsonl", decisions)
    data = funnel(scrape)
    by = {r["repo"]: r for r in data["repos"]}
    a, b = by["o/a"], by["o/b"]
    assert (a["candidates"], a["accepted"], a["gated"], a["shipped"]) == (4, 4, 3, 1)
    assert a["rejected"]["not_duplicate"] == 1 and a["rejected"]["min_work"] == 1
    assert b["rejected"]["library_code"] == 1 and b["rejected"]["has_compute_or_real_comm"] == 1
    for row in [*data["repos"], data["total"]]:
        assert row["gated"] == row["shipped"] + sum(row["rejected"].values())
        assert all(row["failing"][g] >= row["rejected"][g] for g in G.GATE_NAMES)
        assert row["candidates"] >= row["permitted"] >= row["tried"] >= row["accepted"] >= row["gated"]
    for key in ("candidates", "accepted", "gated", "shipped"):
        assert data["total"][key] == sum(r[key] for r in data["repos"])
    assert data["total"]["problems"] == 1
    import argparse

    from mgbench.scrapers.commands import cmd_report

    (scrape / "funnel.json").write_text(
        json.dumps(
            {
                "repos": [],
                "total": {
                    "repo": "total",
                    "files_scanned": 0,
                    "seconds": 0,
                    "skipped": {},
                    **{
                        k: 0
                        for k in (
                            "files_prefiltered",
                            "files_with_collectives",
                            "call_sites",
                            "functions_extracted",
                            "unique",
                            "license_permitted",
                            "classified",
                            "kernels",
                        )
                    },
                },
            }
        )
    )
    out_json = tmp_path / "funnel.json"
    assert cmd_report(argparse.Namespace(out=str(scrape), harness=None, json=str(out_json))) == 0
    assert json.loads(out_json.read_text()) == data
    assert funnel_table(data) in capsys.readouterr().out


def _rendered(tid: str, body: str) -> Any:
    from mgbench.generator.mined import RenderedTask

    cand = {
        "id": f"c-{tid}",
        "qualname": tid,
        "docstring": "",
        "classification": None,
        "provenance": {
            "repo": "o/r",
            "path": f"pkg/{tid}.py",
            "commit": "0" * 40,
            "license": "MIT",
            "url": "https://example.invalid",
            "line_start": 1,
            "line_end": 2,
        },
    }
    return RenderedTask(cand, {"world_sizes": [2, 4], "spec": {"args": []}}, tid, body)


def test_generate_ships_only_gated_tasks_and_refuses_without_a_gate_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mgbench.generator.mined as mined

    tasks = [_rendered("keep", "# keep\n"), _rendered("drop", "# drop\n")]
    monkeypatch.setattr(mined, "rendered_tasks", lambda scrape_dir, harness_file=None: tasks)
    scrape = tmp_path / "scrape"
    scrape.mkdir()
    with pytest.raises(FileNotFoundError, match="gate.jsonl: no level-4 gate decisions"):
        mined.mined_tasks(tmp_path / "out", scrape)
    assert not (tmp_path / "out" / "tasks").exists()
    keep, drop = (G.GateItem(t.task_id, t.cand["id"], t.content_hash, "o/r", "pkg/x.py") for t in tasks)
    (dk, dd) = decide([keep, drop], G.GateContext())
    dk.passed = True  # as if its trace had passed every gate
    write_decisions(scrape / "gate.jsonl", [dk, dd])
    records, paths = mined.mined_tasks(tmp_path / "out", scrape)
    assert [r.task_id for r in records] == ["keep"] and [p.name for p in paths] == ["keep.py"]
    ungated, _ = mined.mined_tasks(tmp_path / "out2", scrape, ungated=True)
    assert [r.task_id for r in ungated] == ["keep", "drop"]
    assert records[0].content_hash == ungated[0].content_hash == tasks[0].content_hash


def test_an_unsettled_harness_does_not_ship() -> None:
    """Its timed call would clone and compare every input: the timing would measure the harness."""
    item = _item("t", comm_bytes=1 << 22, mm_flops=1 << 30)
    assert G.check_task(item, G.GateContext())["settled_call"] is None
    item.settled = False
    assert "unsettled" in G.check_task(item, G.GateContext())["settled_call"]


@given(st.floats(min_value=0.0, max_value=1.0))
def test_harness_share_threshold(share: float) -> None:
    item = _item("t", comm_bytes=1 << 22, mm_flops=1 << 30)
    item.harness_share = share
    got = G.check_task(item, G.GateContext())["harness_share"]
    assert (got is None) == (share <= G.MAX_HARNESS_SHARE)
    item.harness_share = None  # not measured: the gate does not decide
    assert G.check_task(item, G.GateContext())["harness_share"] is None
    item.harness_share = float("nan")  # the benchmark tried and failed: nothing certifies the timed call
    assert "not measured" in G.check_task(item, G.GateContext())["harness_share"]


def test_share_file_gives_one_clear_error(tmp_path: Path) -> None:
    from mgbench.scrapers.level4.commands import harness_shares

    assert harness_shares(tmp_path / "share.json") == {}
    (tmp_path / "share.json").write_text('[{"task": "a", "share": 0.2}, {"task": "b", "error": "x"}]')
    got = harness_shares(tmp_path / "share.json")
    assert got["a"] == 0.2 and math.isnan(got["b"])
    # a row measured for another module of its task certifies nothing: the task changed since
    (tmp_path / "share.json").write_text('[{"task": "a", "content_hash": "h1", "share": 0.01}]')
    assert harness_shares(tmp_path / "share.json", {"a": "h1"})["a"] == 0.01
    assert math.isnan(harness_shares(tmp_path / "share.json", {"a": "h2"})["a"])
    (tmp_path / "share.json").write_text("[{")
    with pytest.raises(ValueError, match="share.json: not JSON"):
        harness_shares(tmp_path / "share.json")


@pytest.mark.parametrize(
    ("comm", "mm", "out", "ships"),
    [
        (8, 0, [1], False),  # an abs-max over a big tensor, one scalar all-reduce: a statistic
        (24, 0, [3, 2], False),  # a few logged moments
        (8, 1 << 30, [1], True),  # a GEMM before the reduction is compute
        (1 << 22, 0, [1], True),  # 4 MiB communicated is communication
        (8, 0, [4096], True),  # a reduced vector, not a statistic
    ],
)
def test_reduced_statistics_do_not_ship(comm: int, mm: int, out: list[int], ships: bool) -> None:
    item = _item("t", comm_bytes=comm, mm_flops=mm, elementwise_flops=1 << 26, outputs=[["float32", out]])
    assert (G.check_task(item, G.GateContext())["not_a_statistic"] is None) == ships


def test_a_task_accepted_at_one_world_size_only_does_not_ship() -> None:
    item = _item("t", comm_bytes=1 << 22, mm_flops=1 << 30)
    assert G.check_task(item, G.GateContext())["world_sizes"] is None
    item.world_sizes = (2,)
    assert "not [4]" in G.check_task(item, G.GateContext())["world_sizes"]
