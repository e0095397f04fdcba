"""Search proposals (rules/order.py `propose`) for scalars and dtypes: a scalar read becomes a float or a 0-d tensor,
index arguments become integers (and integer parameters lose their gradients)."""

from __future__ import annotations

from mgbench.scrapers.harness.inputs.rules.order import propose
from tests.harness.helpers import entry_candidate


def test_a_scalar_read_proposes_a_float_and_a_zero_dim_tensor():
    spec = {
        "entry": "f",
        "kind": "function",
        "args": [{"name": "norm", "kind": "tensor", "shape": ["n"]}],
        "attrs": [],
        "n_attr": 8,
    }
    cand, _ = entry_candidate("", "f", "function", ["norm"])
    err = {
        "type": "RuntimeError",
        "msg": "a Tensor with 8 elements cannot be converted to Scalar",
        "line": "x = norm.item()",
        "in_candidate": True,
    }
    specs = propose(spec, err, cand)
    assert specs[0]["args"][0] == {"name": "norm", "kind": "float", "value": 1.0}
    assert specs[1]["args"][0]["shape"] == []


def test_integer_parameters_lose_their_gradients_and_settings_are_not_drawn():
    """An index dtype proposal for a gradient list drops the gradients (integer parameters have none); an
    input-insensitive run draws statistics but keeps settings (`eps`, `max_norm`) fixed."""
    from mgbench.scrapers.harness.inputs.containerfix import scalar_draws

    spec = {
        "entry": "f",
        "kind": "function",
        "attrs": [],
        "n_attr": 8,
        "args": [{"name": "params", "kind": "tensors", "count": "ws", "shape": ["n"], "grads": True}],
    }
    cand, _ = entry_candidate("", "f", "function", ["params"])
    err = {
        "type": "RuntimeError",
        "msg": "index_select(): Expected dtype int64 for index",
        "line": "x[params]",
        "in_candidate": True,
    }
    ints = [s["args"][0] for s in propose(spec, err, cand) if s["args"][0].get("dtype") == "int64"]
    assert ints and all("grads" not in a for a in ints)
    floats = {
        "entry": "f",
        "kind": "function",
        "attrs": [],
        "n_attr": 8,
        "args": [{"name": "eps", "kind": "float", "value": 1e-5}, {"name": "stat", "kind": "float"}],
    }
    drawn = scalar_draws(floats)[0]["args"]
    assert "draw" not in drawn[0] and drawn[1]["draw"] is True


def test_index_named_argument_becomes_integer_first():
    """'tensors used as indices must be long' on a line naming no argument (`logits_2d[arange_1d, masked_1d]`):
    `target` is made int64 before `vocab_parallel_logits` (the depth-first search used to settle on integer
    logits for vocab-parallel cross entropy)."""
    from mgbench.scrapers.harness.inputs.rules.order import propose
    from tests.harness.helpers import _candidate

    t = {"kind": "tensor", "shape": ["n"], "dtype": "float32", "replicated": False}
    spec = {"args": [{**t, "name": "vocab_parallel_logits"}, {**t, "name": "target"}], "attrs": [], "globals": []}
    err = {
        "type": "IndexError",
        "msg": "tensors used as indices must be long, int, byte or bool tensors",
        "line": "predicted_logits_1d = logits_2d[arange_1d, masked_target_1d]",
    }
    ints = [
        next(a["name"] for a in s["args"] if a.get("dtype") == "int64")
        for s in propose(spec, err, _candidate("f"))
        if any(a.get("dtype") == "int64" for a in s["args"])
    ]
    assert ints[:2] == ["target", "vocab_parallel_logits"]
