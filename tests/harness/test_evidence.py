"""Evidence about an entry's parameters from its own code: body usage, docstrings, shape comments, the file's
path (scrapers/harness/inputs/discovery/evidence.py), and how it rewrites the name-guessed initial spec
(inputs/initial.py `initial_spec`)."""

from __future__ import annotations

import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.scrapers.harness.inputs.discovery.evidence import body_clues
from mgbench.scrapers.harness.inputs.discovery.evidence_text import comment_clues, model_code, shape_rank
from mgbench.scrapers.harness.inputs.discovery.guess import evidence_spec
from mgbench.scrapers.harness.inputs.discovery.name_guess import guess_arg
from mgbench.scrapers.harness.inputs.initial import initial_spec


def _cand(params: list[str], entry: str = "f", path: str = "pkg/utils.py", doc: str | None = None, **kw) -> dict:
    return {
        "id": "c0",
        "entry": entry,
        "kind": kw.get("kind", "function"),
        "params": [{"name": p, "kind": "positional", "annotation": None, "default": None} for p in params],
        "docstring": doc,
        "provenance": {"path": path, "repo": "o/r"},
        **{k: v for k, v in kw.items() if k != "kind"},
    }


def _args(spec: dict) -> dict[str, dict]:
    return {a["name"]: a for a in spec["args"]}


BODY = textwrap.dedent(
    """
    import torch
    import torch.distributed as dist

    def f(x, use_fp8, attn_fn, steps, peer, cfg, prev_rank, prefix):
        b, s, h = x.shape
        if use_fp8:
            x = x * 2
        for _ in range(steps):
            x = attn_fn(x, x, x)
        dist.isend(x, peer)
        dist.recv(x, src=prev_rank)
        if prefix.startswith("layer"):
            pass
        return x * cfg.hidden_size
    """
)


def test_body_usage_gives_kinds_ranks_and_callables():
    spec = initial_spec(_cand(["x", "use_fp8", "attn_fn", "steps", "peer", "cfg", "prev_rank", "prefix"]), BODY)
    a = _args(spec)
    assert a["x"]["kind"] == "tensor" and a["x"]["shape"] == ["n", "n", "n"]
    assert a["use_fp8"] == {"name": "use_fp8", "kind": "bool", "value": False}
    assert a["attn_fn"]["value"] == "scaled_dot_product_attention"  # an attention slot of arity 3, not gelu
    assert a["steps"]["kind"] == "int"
    assert a["peer"] == {"name": "peer", "kind": "int", "expr": "(rank^1)%ws"}
    assert a["prev_rank"]["expr"] == "(rank+ws-1)%ws"
    assert a["prefix"]["kind"] == "const" and isinstance(a["prefix"]["value"], str)
    assert a["cfg"]["kind"] == "namespace" and [f["name"] for f in a["cfg"]["fields"]] == ["hidden_size"]


def test_evidence_beats_the_name_guess():
    """Each of these names alone guesses a 1-D float tensor; the body says otherwise."""
    text = "def f(item, flag, p):\n    if flag:\n        return p(item)\n    assert item.dim() == 4\n"
    before = {a["name"]: a for a in evidence_spec(_cand(["item", "flag", "p"]), text, use_evidence=False)[0]["args"]}
    assert before == {n: guess_arg(n, None, None) for n in ("item", "flag", "p")}
    after, why = evidence_spec(_cand(["item", "flag", "p"]), text)
    a = _args(after)
    assert a["item"]["shape"] == ["n"] * 4 and a["flag"]["kind"] == "bool" and a["p"]["kind"] == "fn"
    assert why["flag"] == "tensor->bool by body"


def test_a_tensor_used_as_a_truth_value_and_as_a_tensor_stays_a_tensor():
    text = "def f(mask):\n    if mask:\n        return mask.sum()\n"
    assert _args(initial_spec(_cand(["mask"]), text))["mask"]["kind"] == "tensor"


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 4), st.sampled_from(["x", "hidden_states", "inp"]))
def test_an_indexed_dimension_is_a_lower_bound_on_the_rank(k, name):
    clues = body_clues(f"def f({name}):\n    return {name}.shape[{k}]\n", "f", "function", [name])
    assert clues[name][0].min_ndim == k + 1
    clues = body_clues(f"def f({name}):\n    return {name}.size(-{k + 1})\n", "f", "function", [name])
    assert clues[name][0].min_ndim == k + 1


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["s", "b", "h", "sq", "np", "hn", "batch", "seq", "hidden"]), min_size=2, max_size=5))
def test_a_shape_comment_gives_the_rank(dims):
    assert shape_rank(f"# [{', '.join(dims)}]") == len(dims)
    assert shape_rank(f"shape: ({', '.join(dims)})") == len(dims)
    text = f"def f(x):\n    y = x + 1  # [{', '.join(dims)}]\n    return y\n"
    assert _args(initial_spec(_cand(["x"]), text))["x"]["shape"] == ["n"] * len(dims)


def test_brackets_that_are_not_shapes_are_not_taken_for_one():
    assert shape_rank("returns [src_rank_of_the_group, destination_rank]") is None
    assert shape_rank("see paper [1]") is None


def test_the_docstring_gives_the_rank_of_the_parameter_it_describes():
    doc = "Gather.\n\nArgs:\n    x (Tensor): input of shape [s, b, h].\n    y (Tensor): a vector.\n"
    clues = comment_clues("def f(x, y):\n    pass\n", "f", "function", doc, ["x", "y"])
    assert clues["x"][0].ndim == 3 and clues["x"][0].source == "docstring" and "y" not in clues


def test_methods_and_autograd_functions_are_found():
    text = (
        "class A:\n    def m(self, x):\n        a, b = x.shape\n\n"
        "class F:\n    def forward(ctx, y):\n        y.dim() == 2\n"
    )
    assert body_clues(text, "A.m", "method", ["x"])["x"][0].ndim == 2
    assert body_clues(text, "F", "autograd_function", ["y"])["y"][0].ndim == 2


def test_model_code_draws_activations_in_bf16_but_keeps_statistics_fp32():
    text = "def f(activations, loss_mask):\n    return activations\n"
    spec, why = evidence_spec(_cand(["activations", "loss_mask"], path="megatron/core/transformer/moe/x.py"), text)
    a = _args(spec)
    assert a["activations"]["dtype"] == "bfloat16" and why["activations"] == "bf16 by path"
    assert a["loss_mask"]["dtype"] == "float32"
    assert model_code("tools/checkpoint/util.py") is None
    assert model_code("tools/util.py", "x = torch.bfloat16") == "bfloat16"
    assert _args(initial_spec(_cand(["activations"], path="tools/util.py"), text))["activations"]["dtype"] == "float32"


def test_a_name_guessed_int_used_as_a_tensor_is_a_tensor():
    assert guess_arg("hidden_states", None, None)["kind"] == "int"  # `hidden` reads as a size
    text = "def f(hidden_states):\n    return hidden_states.view(-1)\n"
    assert _args(initial_spec(_cand(["hidden_states"]), text))["hidden_states"]["kind"] == "tensor"


def test_a_parametrized_case_still_wins_over_the_evidence():
    text = "def test_f(flag):\n    if flag:\n        pass\n"
    cand = _cand(["flag"], entry="test_f", decorators=['pytest.mark.parametrize("flag", [3])'])
    assert _args(initial_spec(cand, text))["flag"] == {"name": "flag", "kind": "int", "expr": "3"}


def test_structured_guesses_are_kept():
    """A group, a stream or a device guessed from the name is not replaced by a body clue."""
    text = "def f(group, stream):\n    if group:\n        pass\n    if stream:\n        pass\n"
    a = _args(initial_spec(_cand(["group", "stream"]), text))
    assert a["group"]["kind"] == "group" and a["stream"]["kind"] == "stream"


def test_a_parallel_mode_is_a_mode_not_a_tensor():
    """ColossalAI's ParallelMode: from the annotation, or from the global context it is passed to."""
    cand = _cand(["t", "parallel_mode"])
    cand["params"][1]["annotation"] = "ParallelMode"
    a = _args(initial_spec(cand, "def f(t, parallel_mode):\n    return t\n"))
    assert a["parallel_mode"] == {"name": "parallel_mode", "kind": "const", "value": "GLOBAL"}
    text = "def f(t, pm):\n    return gpc.get_world_size(pm)\n"
    assert _args(initial_spec(_cand(["t", "pm"]), text))["pm"]["kind"] == "const"


def test_a_rank_passed_on_to_a_helper_of_the_module_is_a_rank():
    text = textwrap.dedent(
        """
        def _fill(t, op, peer, ops):
            ops.append(dist.P2POp(op, t, peer))

        def f(t, send_dst: int, recv_src: int):
            ops = []
            _fill(t, dist.isend, send_dst, ops)
            _fill(t, dist.irecv, recv_src, ops)
        """
    )
    cand = _cand(["t", "send_dst", "recv_src"])
    for p in cand["params"][1:]:
        p["annotation"] = "int"
    assert {a["name"]: a["expr"] for a in initial_spec(cand)["args"] if a["kind"] == "int"} == {
        "send_dst": "n",  # the name guess: out of range
        "recv_src": "n",
    }
    a = _args(initial_spec(cand, text))
    assert a["send_dst"]["expr"] == a["recv_src"]["expr"] == "(rank^1)%ws"


def test_a_root_compared_with_the_own_rank_stays_a_root():
    text = "def f(t, root: int):\n    if dist.get_rank() == root:\n        return t\n"
    cand = _cand(["t", "root"])
    assert _args(initial_spec(cand, text))["root"]["expr"] == "0"


def test_an_async_flag_keeps_false_whatever_callers_pass():
    """The harness cannot wait on a handle it does not see: async_op=True at a call site is not taken."""
    cand = _cand(["t", "async_op"])
    cand["evidence"] = {"params": {"async_op": [{"kind": "bool", "source": "call_site a.py:3", "value": True}]}}
    assert _args(initial_spec(cand, "def f(t, async_op):\n    return t\n"))["async_op"]["value"] is False
    cand["params"][1]["name"] = "use_fp8"
    cand["evidence"]["params"] = {"use_fp8": cand["evidence"]["params"]["async_op"]}
    assert _args(initial_spec(cand, "def f(t, use_fp8):\n    return t\n"))["use_fp8"]["value"] is True


def test_a_root_that_is_also_a_send_destination_stays_a_root():
    text = "def f(t, rank, root):\n    if rank == root:\n        return t\n    dist.send(t, dst=root)\n"
    assert _args(initial_spec(_cand(["t", "rank", "root"]), text))["root"]["expr"] == "0"


def test_a_number_put_into_a_tensor_is_a_number():
    text = "def f(item, dtype):\n    return torch.tensor([item], dtype=dtype)\n"
    item = _args(initial_spec(_cand(["item", "dtype"]), text))["item"]
    assert item == {"name": "item", "kind": "float", "draw": True}  # drawn per rank and seed
    text = "def f(count):\n    return torch.tensor([count], dtype=torch.int64)\n"
    assert _args(initial_spec(_cand(["count"]), text))["count"] == {"name": "count", "kind": "int", "expr": "n+rank"}


def test_an_object_with_param_groups_is_an_optimizer():
    text = "def f(opt):\n    for g in opt.param_groups:\n        pass\n"
    assert _args(initial_spec(_cand(["opt"]), text))["opt"]["kind"] == "optimizer"


def test_a_number_beside_an_integer_dtype_is_an_int():
    text = "def f(item, dtype):\n    return torch.tensor([item], dtype=dtype)\n"
    cand = _cand(["item", "dtype"])
    cand["evidence"] = {"params": {"dtype": [{"kind": "dtype", "source": "call_site a.py:1", "value": "int32"}]}}
    assert _args(initial_spec(cand, text))["item"] == {"name": "item", "kind": "int", "expr": "n+rank"}
