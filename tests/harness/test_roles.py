"""Tensor ranks by role (scrapers/harness/inputs/discovery/roles.py) and the body evidence that overrides them: what the
initial spec gives a tensor the repository says nothing about, and that evidence still wins."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mgbench.scrapers.harness.inputs.discovery.roles import DEFAULT, ROLES, role_of, role_shape
from mgbench.scrapers.harness.inputs.initial import initial_spec
from mgbench.scrapers.harness.make.runtime import _mg_clone


def _cand(src: str, entry: str = "f", path: str = "pkg/ops.py") -> tuple[dict, str]:
    import ast

    fn = next(s for s in ast.parse(src).body if isinstance(s, ast.FunctionDef) and s.name == entry)
    params = [{"name": a.arg, "kind": "positional", "annotation": None, "default": None} for a in fn.args.args]
    cand = {"id": "c", "entry": entry, "kind": "function", "params": params, "provenance": {"path": path}}
    return cand, src


def _args(src: str, **kw) -> dict[str, dict]:
    cand, text = _cand(src, **kw)
    return {a["name"]: a for a in initial_spec(cand, text)["args"]}


@pytest.mark.parametrize(
    "name, ndim",
    [
        ("hidden_states", 2),
        ("x", 2),
        ("q", 4),
        ("k_local", 4),
        ("value_states", 4),
        ("vocab_parallel_logits", 3),
        ("loss", 0),
        ("input_ids", 1),
        ("labels", 1),
        ("flat_grads", 1),
        ("grad_shard", 1),
        ("bias", 1),
        ("b1", 1),
        ("amax_history", 1),
        ("advantages", 1),
        ("rs_input_1d", 1),
        ("x_3d", 3),
        ("keys_cache", 2),  # `keys` is not an attention operand's name
    ],
)
def test_roles_give_the_rank_production_code_passes(name, ndim):
    assert role_of(name).ndim == ndim


def test_a_bare_weight_is_a_norm_scale_only_in_norm_code():
    assert role_of("weight", "tp_rms_norm layers/norm.py").ndim == 1
    assert role_of("weight", "linear_forward layers/linear.py").ndim == 2


def test_role_names_are_unique_and_the_default_is_a_matrix():
    names = [r.name for r in ROLES]
    assert len(names) == len(set(names)) and DEFAULT.ndim == 2


@given(ndim=st.integers(0, 5), first=st.sampled_from(["n", "n*ws", "n+(rank+i)%ws"]))
def test_role_shape_keeps_the_first_dimension(ndim, first):
    shape = role_shape({"shape": [first]}, ndim)
    assert len(shape) == ndim and (ndim == 0 or shape[0] == first and set(shape[1:]) <= {"n"})


def test_matmul_operands_stay_matrices():
    a = _args("def f(a, w_flat, m):\n    y = a @ w_flat.t()\n    return torch.matmul(y, m)\n")
    assert len(a["w_flat"]["shape"]) == 2  # a flat name, but a matmul operand: evidence wins over the role
    assert len(a["a"]["shape"]) == 2 and len(a["m"]["shape"]) == 2


def test_bmm_operands_are_batches_of_matrices():
    a = _args("def f(x, y):\n    return torch.bmm(x, y)\n")
    assert len(a["x"]["shape"]) == 3 and len(a["y"]["shape"]) == 3


def test_exact_body_evidence_wins_over_the_role():
    a = _args("def f(q, bias):\n    b, s, h = q.shape\n    assert bias.dim() == 2\n    return q + bias\n")
    assert len(a["q"]["shape"]) == 3 and len(a["bias"]["shape"]) == 2


def test_a_least_rank_only_raises_the_role_rank():
    a = _args("def f(hidden, q):\n    return hidden.size(0) + q.shape[1]\n")
    assert len(a["hidden"]["shape"]) == 2 and len(a["q"]["shape"]) == 4


def test_labels_follow_their_logits_and_are_integers():
    a = _args("def f(vocab_parallel_logits, target):\n    return vocab_parallel_logits.max(-1) - target\n")
    assert len(a["vocab_parallel_logits"]["shape"]) == 3 and len(a["target"]["shape"]) == 2
    assert a["target"]["dtype"] == "int64"


def test_adam_moments_follow_their_parameters():
    a = _args("def f(W1, b1, exp_avg_W1, exp_avg_b1, grad_shard, exp_avg):\n    return W1\n")
    assert len(a["exp_avg_W1"]["shape"]) == 2 and len(a["exp_avg_b1"]["shape"]) == 1
    assert len(a["exp_avg"]["shape"]) == 1  # the shard's


def test_dimension_indices_are_distinct_and_the_tensor_has_them():
    src = "def f(x, scatter_dim, gather_dim):\n    return torch.cat(torch.tensor_split(x, 2, scatter_dim), gather_dim)"
    a = _args(src)
    assert (a["scatter_dim"]["expr"], a["gather_dim"]["expr"]) == ("0", "1") and len(a["x"]["shape"]) == 2
    a = _args("def f(x, seq_dim, head_dim):\n    return x\n")
    assert (a["seq_dim"]["expr"], a["head_dim"]["expr"]) == ("1", "2") and len(a["x"]["shape"]) == 4


def test_a_lone_head_dim_is_left_to_the_name_guess():
    a = _args("def f(x, head_dim):\n    return x\n")
    assert a["head_dim"]["expr"] == "0" and len(a["x"]["shape"]) == 2


def test_a_projection_slot_is_an_nn_linear():
    a = _args("def f(x, up_proj, act):\n    return act(up_proj(x))\n")
    assert a["up_proj"]["kind"] == "linear" and a["up_proj"]["replicated"]
    assert a["act"]["kind"] == "fn"


def test_a_cloned_linear_keeps_its_forward():
    import torch

    m = torch.nn.Linear(4, 3, bias=False)
    c = _mg_clone(m)
    x = torch.randn(2, 4)
    assert isinstance(c, torch.nn.Linear) and c is not m and torch.equal(c(x), m(x))
