"""Sizes and dimensions (scrapers/harness/inputs/sizefix.py, render's full size): sizes read from errors, too few
dimensions, gloo size checks, matmul operands, a rank's slot, the element cap at full size."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.scrapers.harness.inputs.rules.order import propose
from mgbench.scrapers.harness.inputs.sizefix import EXPRS, expr_for, ndim_fixes, size_fixes
from mgbench.scrapers.harness.make import runtime
from mgbench.scrapers.harness.make.render import SMOKE_N
from tests.harness.helpers import _candidate, _t


def test_full_size_keeps_every_input_under_the_element_cap():
    """Full size is n = 1024 unless an input would pass FULL_MAX_ELEMS at world size 8: a 4-D input
    `[n, n, n, n]` (4 TiB at 1024) gets n = 64; never below twice the smoke size."""
    from mgbench.scrapers.harness.make.render import FULL_MAX_ELEMS, full_n

    t = lambda *shape: {"args": [{"name": "x", "kind": "tensor", "shape": list(shape)}]}  # noqa: E731
    assert full_n(t("n", "n")) == 1024 and full_n(t("n", "n", "n", "n")) == 64
    assert full_n(t("n*ws", "n", "n")) == 128 and 128 * 8 * 128 * 128 <= FULL_MAX_ELEMS
    assert full_n(t("n", "n", "n", "n", "n", "n")) == 16
    field = {
        "args": [
            {
                "name": "p",
                "kind": "tensor",
                "shape": ["n"],
                "fields": [{"name": "main_grad", "kind": "tensor", "shape": ["n", "n", "n"]}],
            }
        ]
    }
    assert full_n(field) == 256
    attr = {
        "args": [{"name": "x", "kind": "tensor", "shape": ["n"]}],  # attributes stay at n_attr = 8
        "attrs": [{"name": "w", "kind": "tensor", "shape": ["n", "n", "n"]}],
    }
    assert full_n(attr) == 1024


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(EXPRS), st.sampled_from([2, 4]))
def test_a_size_read_from_an_error_maps_back_to_a_shape_with_that_size(expr, ws):
    """Whatever expression produced a size in a run at world size ws, the expression chosen for that size
    gives it again at that world size (the search proposes shapes that reproduce the size the error wants)."""
    size = runtime._mg_eval(expr, SMOKE_N, ws, 0)
    assert runtime._mg_eval(expr_for(size, ws), SMOKE_N, ws, 0) == size
    assert expr_for(SMOKE_N * 1000 + 7, ws) is None


def test_too_few_dimensions_grow_every_tensor_the_line_indexes():
    """`assert A.shape[-1] == B.shape[-2]` on 1-D guesses: one spec gives B two dimensions (A keeps one); a
    `Dimension out of range (... got 1)` grows the suspect to two."""
    spec = {
        "args": [
            {"name": "A", "kind": "tensor", "shape": ["n"]},
            {"name": "B", "kind": "tensor", "shape": ["n"]},
            {"name": "C", "kind": "tensor", "shape": ["n"]},
        ],
        "attrs": [],
    }
    fixes = ndim_fixes(
        spec, "tuple index out of range", "assert A.shape[-1] == B.shape[-2] and C.size(2) > 0", spec["args"]
    )
    assert [a["shape"] for a in fixes[0]["args"]] == [["n"], ["n", "n"], ["n", "n", "n"]]
    assert len(fixes) == 3
    fixes = ndim_fixes(
        spec,
        "Dimension out of range (expected to be in range of [-1, 0], but got 1)",
        "y = A.transpose(0, 1)",
        spec["args"][:1],
    )
    assert [f["args"][0]["shape"] for f in fixes] == [["n", "n"]]
    fixes = ndim_fixes(
        spec,
        "Dimension out of range (expected to be in range of [-1, 0], but got -2)",
        "y = A.transpose(-2, -1)",
        spec["args"][:1],
    )
    assert [f["args"][0]["shape"] for f in fixes] == [["n", "n"]]  # dim -2 needs two, not three
    assert ndim_fixes(spec, "size mismatch", "A.shape[3]", spec["args"]) == []


def test_gloo_size_checks_name_the_sizes_to_fix():
    spec = {
        "args": [{"name": "out", "kind": "tensor", "shape": ["n"]}, {"name": "inp", "kind": "tensor", "shape": ["n"]}],
        "attrs": [],
    }
    msg = (
        "[rank0]:[F1130 ProcessGroupGloo.cpp:1537] Check failed: outputShape[0] * worldSize == "
        "inputShape[0] (16 vs. 8)."
    )
    fixes = size_fixes(spec, msg, spec["args"])
    assert [["n"], ["n*ws"]] in [[a["shape"] for a in f["args"]] for f in fixes]  # the input grows
    msg = "ProcessGroupGloo::allgather: invalid tensor size at index 0 (expected (8), got (16))"  # a real one
    fixes = size_fixes(spec, msg, spec["args"])
    assert [["n"], ["n"]] not in [[a["shape"] for a in f["args"]] for f in fixes] and fixes
    four = size_fixes(
        {"args": [{"name": "out", "kind": "tensor", "shape": ["n"]}], "attrs": []},
        "shape '[8]' is invalid for input of size 2",
        [{"name": "out", "kind": "tensor", "shape": ["n"]}],
        ws=4,
    )
    assert [f["args"][0]["shape"] for f in four] == [["n//ws"]]  # 2 is n//ws at world size 4


def test_a_one_dimensional_matmul_operand_is_first_proposed_as_a_matrix():
    """`torch.matmul(ag_out, weight)` with a 1-D weight of the wrong length: the weight first becomes a
    matrix with the right rows (an all-gather + GEMM stays a GEMM), then the 1-D fix."""
    spec = {"args": [{"name": "weight", "kind": "tensor", "shape": ["n"]}], "attrs": []}
    msg = "inconsistent tensor size, expected tensor [16] and src [8] to have the same number of elements"
    fixes = size_fixes(spec, msg, spec["args"], line="out = torch.matmul(ag_out, weight)")
    assert [f["args"][0]["shape"] for f in fixes] == [["n*ws", "n"], ["n*ws"]]
    assert [f["args"][0]["shape"] for f in size_fixes(spec, msg, spec["args"], line="s = (a * weight).sum()")] == [
        ["n*ws"]
    ]


def test_slot_of_one_rank_gets_a_leading_world_size_dimension():
    spec = {"args": [_t("sendbuf", ["n", "n"]), _t("recvbuf")], "attrs": [], "globals": [], "entry": "f"}
    err = {
        "type": "RuntimeError",
        "line": "recvbuf[rank] = sendbuf",
        "msg": "expand(torch.FloatTensor{[8, 8]}, size=[8]): the number of sizes provided (1) must be greater "
        "or equal to the number of dimensions in the tensor (2)",
    }
    first = propose(spec, err, _candidate("f"))[0]
    assert {a["name"]: a["shape"] for a in first["args"]} == {"sendbuf": ["n", "n"], "recvbuf": ["ws", "n", "n"]}
