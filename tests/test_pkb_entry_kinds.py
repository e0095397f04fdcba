"""benchmarks/pkb_entry_kinds.py: a peer's inputs are built in child rank processes (a failing problem gets
its reason, the others go on) and compared kind by kind with a synthesized spec."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "pkb_entry_kinds.py"
_spec = importlib.util.spec_from_file_location("pkb_entry_kinds", _PATH)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

# a stand-in peer checkout of our own: its builder needs the process group (new_group) like PKB's
BUILDER = """import torch
import torch.distributed as dist


def create_input_tensor(rank, world_size, problem_id, base_shape, dtype, trial=0, device=None):
    if problem_id == 1:
        g = dist.new_group(ranks=list(range(world_size)))
        splits = [3, 5] if rank == 0 else [5, 3]
        return (torch.zeros(base_shape, dtype=dtype, device=device), splits, dist.get_rank(g), None)
    if problem_id == 2:
        raise RuntimeError("needs a GPU")
    return (torch.zeros(4, dtype=torch.int64, device=device), [2, 2])
"""

MODULE_OF = {1: "1_alltoallv.py", 2: "2_gpu_only.py", 3: "3_lookup.py"}


@pytest.fixture(scope="module")
def peer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("peer")
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "input_output_tensors.py").write_text(BUILDER)
    (tmp_path / "reference").mkdir()
    for name in MODULE_OF.values():
        (tmp_path / "reference" / name).write_text("def solution(*a):\n    return a\n")
    (tmp_path / "reference" / "fix_indexing.sh").write_text("")
    return tmp_path


@pytest.fixture(scope="module")
def inputs(peer: Path) -> dict:
    """One pair of child ranks for every test of the module (each pair imports torch twice)."""
    return bench.pkb_inputs(peer, [1, 2, 3], (4, 6), timeout=120)


def _cand(pid: int, params: list[tuple[str, str | None]]) -> dict:
    return {
        "id": f"c{pid}",
        "qualname": "solution",
        "cluster": f"c{pid}",
        "provenance": {"path": f"reference/{MODULE_OF[pid]}"},
        "params": [{"name": n, "kind": "positional", "default": d} for n, d in params],
    }


def test_peer_inputs_are_built_in_child_ranks_and_failures_get_reasons(peer, inputs):
    assert bench.problems(peer) == MODULE_OF  # the shell script is not a problem
    got = inputs
    r0, r1 = got[1]["ranks"]
    assert r0[0] == {"kind": "tensor", "rank": 2, "family": "float"} and r0[2:] == [{"kind": "int"}, {"kind": "none"}]
    assert (r0[1], r1[1]) == ({"kind": "ints", "values": [3, 5]}, {"kind": "ints", "values": [5, 3]})
    assert got[2] == {"error": "RuntimeError: needs a GPU"}
    assert got[3]["ranks"][0][0]["family"] == "int"


def test_spec_is_compared_kind_by_kind_with_the_causes(inputs, tmp_path):
    specs = {
        1: [
            {"name": "x", "kind": "tensor", "shape": ["n"]},  # 1-D where the peer passes 2-D
            {"name": "splits", "kind": "splits", "expr": "n"},  # even where the peer's are uneven
            {"name": "src", "kind": "float", "value": 0.5},  # a float for an int
        ],
        3: [
            {"name": "ids", "kind": "tensor", "shape": ["n"], "dtype": "int64"},
            {"name": "sizes", "kind": "splits", "expr": "n"},
        ],
    }
    cands = [
        _cand(1, [("x", None), ("splits", None), ("src", None), ("group", "None")]),
        _cand(3, [("ids", None), ("sizes", None)]),
    ]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cands))
    (tmp_path / "h.jsonl").write_text(
        "".join(json.dumps({"id": f"c{p}", "accepted": True, "spec": {"args": a}}) + "\n" for p, a in specs.items())
    )
    hs = bench.harness_of(tmp_path / "c.jsonl", tmp_path / "h.jsonl")
    rows = {p: bench.compare(p, hs[p], inputs[p]) for p in (1, 3)}
    assert [a["causes"] for a in rows[1]["args"]] == [["rank"], ["splits"], ["scalar kind"], []]
    assert not rows[1]["same_kind"] and rows[3]["same_kind"]
    s = bench.summary(list(rows.values()), 3)
    assert (s["accepted"], s["same_kind"], s["compared"]) == (2, 1, 2)
    assert s["mismatched_problems_by_cause"] == {"rank": 1, "splits": 1, "scalar kind": 1}
