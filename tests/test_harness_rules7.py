"""Harness rules of session 7: parameters with gradients (gradient norms and clipping), scalars read with
`float()`/`.item()`, sizes taken from the failure message, and guesses for indices, rank lists, events and
reduce ops."""
from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapers.harness import runtime
from scrapers.harness.guess import guess_arg
from scrapers.harness.mutate import propose
from scrapers.harness.render import SMOKE_N
from scrapers.harness.search import Budget, synthesize
from scrapers.harness.sizes import EXPRS, expr_for, ndim_fixes, size_fixes
from tests.harness_cases import entry_candidate

FAST = Budget(seconds=40, attempts=14, attempt_timeout_s=6, mem_mb=512, ws4_attempts=0)

GRAD_NORM = '''import torch
import torch.distributed as dist


def global_grad_norm(parameters, norm_type=2, mpu=None):
    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    parameters = [p for p in parameters if p.grad is not None]
    norm_type = float(norm_type)
    total = torch.zeros(1)
    for p in parameters:
        total += p.grad.detach().float().norm(norm_type) ** norm_type
    if mpu is not None:
        dist.all_reduce(total, group=mpu.get_model_parallel_group())
    return total ** (1.0 / norm_type)
'''

CLIP = '''import torch
import torch.distributed as dist


def clip_grads(parameters, max_norm):
    grads = [p.grad for p in parameters if p.grad is not None]
    max_norm = float(max_norm)
    total = torch.stack([g.norm() ** 2 for g in grads]).sum()
    dist.all_reduce(total)
    coef = max_norm / (total.sqrt() + 1e-6)
    for g in grads:
        g.mul_(torch.clamp(coef, max=1.0))
    return total.sqrt()
'''

ROW_PARALLEL = '''import torch
import torch.distributed as dist


def row_parallel_linear(x, weight):
    part = x.chunk(dist.get_world_size(), dim=-1)[dist.get_rank()]
    out = torch.nn.functional.linear(part, weight)
    dist.all_reduce(out)
    return out
'''


def _with_defaults(text: str, entry: str, required: list[str], defaults: dict[str, str]) -> tuple[dict, str]:
    cand, text = entry_candidate(text, entry, "function", required)
    cand["params"] += [{"name": k, "kind": "positional", "annotation": None, "default": v}
                       for k, v in defaults.items()]
    return cand, text


def test_gradient_norm_gets_parameters_with_gradients_and_a_parallel_state():
    """DeepSpeed-style `get_grad_norm(parameters, norm_type=2, mpu=None)`: tensors without `.grad` are all
    filtered out (no communication); the harness passes parameters with per-rank gradients, a float norm
    type and a parallel-state `mpu`."""
    res = synthesize(*_with_defaults(GRAD_NORM, "global_grad_norm", ["parameters"],
                                     {"norm_type": "2", "mpu": "None"}), FAST)
    assert res.accepted, (res.reason, res.last_error)
    args = {a["name"]: a for a in res.spec["args"]}
    assert args["parameters"]["kind"] == "tensors" and args["parameters"]["grads"] is True
    assert args["mpu"] == {"name": "mpu", "kind": "group", "value": "state", "keyword": True}
    assert args["norm_type"]["kind"] == "float"


def test_clipping_reads_max_norm_as_a_float_and_outputs_the_clipped_gradients():
    """`float(max_norm)` on a guessed tensor fails with 'only one element tensors...': the argument is a float;
    gradients clipped in place are part of what the harness compares."""
    res = synthesize(*_with_defaults(CLIP, "clip_grads", ["parameters", "max_norm"], {}), FAST)
    assert res.accepted, (res.reason, res.last_error)
    args = {a["name"]: a for a in res.spec["args"]}
    assert args["max_norm"]["kind"] == "float" and args["parameters"].get("grads") is True


def test_a_scalar_read_proposes_a_float_and_a_zero_dim_tensor():
    spec = {"entry": "f", "kind": "function", "args": [{"name": "norm", "kind": "tensor", "shape": ["n"]}],
            "attrs": [], "n_attr": 8}
    cand, _ = entry_candidate("", "f", "function", ["norm"])
    err = {"type": "RuntimeError", "msg": "a Tensor with 8 elements cannot be converted to Scalar",
           "line": "x = norm.item()", "in_candidate": True}
    specs = propose(spec, err, cand)
    assert specs[0]["args"][0] == {"name": "norm", "kind": "float", "value": 1.0}
    assert specs[1]["args"][0]["shape"] == []


def test_parameter_lists_keep_their_gradients_through_clone_and_output():
    a = {"name": "params", "kind": "tensors", "count": "ws", "shape": ["n"], "grads": True}
    ps = runtime._mg_value(a, 0, 0, 1, 2, 4, "cpu")
    assert len(ps) == 2 and all(isinstance(p, torch.nn.Parameter) and p.grad is not None for p in ps)
    twin = runtime._mg_clone(ps)
    assert all(torch.equal(p.grad, q.grad) and p.grad is not q.grad for p, q in zip(ps, twin))
    plain = runtime._mg_plain(ps)
    assert len(plain) == 4 and torch.equal(plain[1], ps[0].grad)
    other = runtime._mg_value(a, 0, 0, 0, 2, 4, "cpu")          # rank 0 draws different gradients
    assert not torch.equal(other[0].grad, ps[0].grad)


def test_sizes_named_by_the_error_fix_one_dimension():
    """`linear(part, weight)` with `part` a 1/ws slice: the weight's in-features take the size the matmul
    named (the blind shape list has no `n//ws`)."""
    spec = {"args": [{"name": "weight", "kind": "tensor", "shape": ["n", "n"]}], "attrs": []}
    fixes = size_fixes(spec, "mat1 and mat2 shapes cannot be multiplied (1x4 and 8x8)", spec["args"])
    assert [f["args"][0]["shape"] for f in fixes] == [["n//ws", "n"], ["n", "n//ws"]]
    spec = {"args": [{"name": "out", "kind": "tensor", "shape": ["n*ws"]}], "attrs": []}
    fixes = size_fixes(spec, "shape '[16]' is invalid for input of size 4", spec["args"])
    assert [f["args"][0]["shape"] for f in fixes] == [["n//ws"]]
    res = synthesize(*entry_candidate(ROW_PARALLEL, "row_parallel_linear", "function", ["x", "weight"]), FAST)
    assert res.accepted, (res.reason, res.last_error)
    assert any("n//ws" in d for a in res.spec["args"] for d in a.get("shape", []))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(EXPRS), st.sampled_from([2, 4]))
def test_a_size_read_from_an_error_maps_back_to_a_shape_with_that_size(expr, ws):
    """Whatever expression produced a size in a run at world size ws, the expression chosen for that size
    gives it again at that world size (the search proposes shapes that reproduce the size the error wants)."""
    size = runtime._mg_eval(expr, SMOKE_N, ws, 0)
    assert runtime._mg_eval(expr_for(size, ws), SMOKE_N, ws, 0) == size
    assert expr_for(SMOKE_N * 1000 + 7, ws) is None


def test_guesses_for_indices_rank_lists_events_reduce_ops_and_norms():
    kinds = {name: guess_arg(name, None, None) for name in
             ("tp_index", "buffer_idx", "pp_group_ranks", "start_event", "op", "norm_type", "max_norm", "mpu",
              "warmup", "bucket_cap_mb", "num_ranks")}
    assert kinds["tp_index"] == {"name": "tp_index", "kind": "int", "expr": "0"}
    assert kinds["buffer_idx"]["expr"] == "0"
    assert kinds["pp_group_ranks"]["kind"] == "ranks" and kinds["num_ranks"]["kind"] == "int"
    assert kinds["start_event"]["kind"] == "event" and kinds["op"]["kind"] == "reduce_op"
    assert kinds["norm_type"]["value"] == 2.0 and kinds["max_norm"]["value"] == 1.0
    assert kinds["mpu"]["value"] == "state" and guess_arg("datatype", None, None)["kind"] == "dtype"
    assert kinds["warmup"]["kind"] == kinds["bucket_cap_mb"]["kind"] == "int"
    assert runtime._mg_value({"kind": "ranks"}, 0, 0, 0, 4, 8, "cpu") == [0, 1, 2, 3]
    assert runtime._mg_value({"kind": "reduce_op"}, 0, 0, 0, 2, 8, "cpu") == torch.distributed.ReduceOp.SUM


def test_too_few_dimensions_grow_every_tensor_the_line_indexes():
    """`assert A.shape[-1] == B.shape[-2]` on 1-D guesses: one spec gives B two dimensions (A keeps one); a
    `Dimension out of range (... got 1)` grows the suspect to two."""
    spec = {"args": [{"name": "A", "kind": "tensor", "shape": ["n"]}, {"name": "B", "kind": "tensor", "shape": ["n"]},
                     {"name": "C", "kind": "tensor", "shape": ["n"]}], "attrs": []}
    fixes = ndim_fixes(spec, "tuple index out of range", "assert A.shape[-1] == B.shape[-2] and C.size(2) > 0",
                       spec["args"])
    assert [a["shape"] for a in fixes[0]["args"]] == [["n"], ["n", "n"], ["n", "n", "n"]]
    assert len(fixes) == 3
    fixes = ndim_fixes(spec, "Dimension out of range (expected to be in range of [-1, 0], but got 1)",
                       "y = A.transpose(0, 1)", spec["args"][:1])
    assert [f["args"][0]["shape"] for f in fixes] == [["n", "n"]]
    fixes = ndim_fixes(spec, "Dimension out of range (expected to be in range of [-1, 0], but got -2)",
                       "y = A.transpose(-2, -1)", spec["args"][:1])
    assert [f["args"][0]["shape"] for f in fixes] == [["n", "n"]]          # dim -2 needs two, not three
    assert ndim_fixes(spec, "size mismatch", "A.shape[3]", spec["args"]) == []


KEYED = '''import torch
import torch.distributed as dist


def broadcast_batch(keys, data, kind):
    sizes = {}
    for key in keys:
        assert data[key].dtype == kind
        sizes[key] = data[key].numel()
    flat = torch.cat([data[key].reshape(-1) for key in keys])
    dist.broadcast(flat, src=0)
    out, offset = {}, 0
    for key in keys:
        out[key] = flat[offset:offset + sizes[key]].view_as(data[key])
        offset += sizes[key]
    return out
'''

CACHED = '''import torch
import torch.distributed as dist


class Reducer:
    def reduce_async(self, tensor):
        key = (tensor.dtype, tensor.numel())
        if key not in self.cache:
            self.cache[key] = torch.zeros_like(tensor)
        buf = self.cache[key]
        buf.copy_(tensor * 2)
        dist.all_reduce(buf)
        return buf
'''

STAT = '''import torch
import torch.distributed as dist


def reduce_max_stat(stat):
    t = torch.tensor([stat], dtype=torch.float32)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()
'''


def test_a_dict_read_through_a_list_of_keys():
    """Megatron-style `broadcast_data(keys, data, datatype)`: `data[key]` for `key in keys` makes `data` a dict
    of per-rank tensors and `keys` its key list."""
    res = synthesize(*entry_candidate(KEYED, "broadcast_batch", "function", ["keys", "data", "kind"]), FAST)
    assert res.accepted, (res.reason, res.last_error)
    args = {a["name"]: a for a in res.spec["args"]}
    assert args["keys"] == {"name": "keys", "kind": "const", "value": ["w0", "w1"]}
    assert args["data"]["dict"] is True and [f["name"] for f in args["data"]["fields"]] == ["w0", "w1"]


def test_a_membership_test_on_an_attribute_makes_it_a_dict():
    res = synthesize(*entry_candidate(CACHED, "Reducer.reduce_async", "method", ["self", "tensor"]), FAST)
    assert res.accepted, (res.reason, res.last_error)
    assert {"name": "cache", "kind": "namespace", "dict": True, "fields": []} in res.spec["attrs"]


def test_a_reduced_float_statistic_is_drawn_per_seed():
    """A float input held constant makes the task input-insensitive; drawn per rank and seed it is not, and
    the value differs between seeds (zeros and another seed fail the comparison)."""
    res = synthesize(*entry_candidate(STAT, "reduce_max_stat", "function", ["stat"]), FAST)
    assert res.accepted, (res.reason, res.last_error)
    assert res.spec["args"][0]["kind"] == "float" and res.spec["args"][0]["draw"] is True
    a = res.spec["args"][0]
    assert runtime._mg_value(a, 0, 0, 0, 2, 8, "cpu") != runtime._mg_value(a, 0, 1, 0, 2, 8, "cpu")


def test_gloo_size_checks_name_the_sizes_to_fix():
    spec = {"args": [{"name": "out", "kind": "tensor", "shape": ["n"]}, {"name": "inp", "kind": "tensor",
                                                                           "shape": ["n"]}], "attrs": []}
    msg = "[rank0]:[F1130 ProcessGroupGloo.cpp:1537] Check failed: outputShape[0] * worldSize == inputShape[0] (16 vs. 8)."
    fixes = size_fixes(spec, msg, spec["args"])
    assert [["n"], ["n*ws"]] in [[a["shape"] for a in f["args"]] for f in fixes]     # the input grows
    msg = "ProcessGroupGloo::allgather: invalid tensor size at index 0 (expected (8), got (16))"    # a real one
    fixes = size_fixes(spec, msg, spec["args"])
    assert [["n"], ["n"]] not in [[a["shape"] for a in f["args"]] for f in fixes] and fixes
    four = size_fixes({"args": [{"name": "out", "kind": "tensor", "shape": ["n"]}], "attrs": []},
                      "shape '[8]' is invalid for input of size 2", [{"name": "out", "kind": "tensor",
                                                                     "shape": ["n"]}], ws=4)
    assert [f["args"][0]["shape"] for f in four] == [["n//ws"]]          # 2 is n//ws at world size 4


GATED = '''import torch
import torch.distributed as dist


class Syncer:
    def sync(self, grad):
        if self.enabled:
            dist.all_reduce(grad)
        return grad
'''


def test_flags_guessed_false_are_set_when_nothing_communicates():
    """`if self.enabled:` around the collective: with the flag False the run communicates nothing; setting the
    flags guessed False opens the gate."""
    res = synthesize(*entry_candidate(GATED, "Syncer.sync", "method", ["self", "grad"]), FAST)
    assert res.accepted, (res.reason, res.last_error)
    assert {"name": "enabled", "kind": "bool", "value": True} in res.spec["attrs"]


def test_a_missing_package_is_a_missing_import_not_a_search_failure():
    from scrapers.harness.sandbox import Attempt
    from scrapers.harness.search import categorize
    err = {"type": "ModuleNotFoundError", "msg": "No module named 'expecttest'", "line": "import expecttest",
           "in_candidate": True}
    assert categorize(Attempt("error", [{"ok": False, "error": err}])) == ("needs_import: expecttest", True)


def test_module_annotations_make_models_and_lists_of_model_chunks():
    assert guess_arg("model", "List[torch.nn.Module]", None)["chunks"] == 2
    assert guess_arg("module", "MegatronModule", None)["kind"] == "module"
    assert "chunks" not in guess_arg("module", "MegatronModule", None)
    assert guess_arg("mod", "ModuleType", None)["kind"] == "tensor"


def test_integer_parameters_lose_their_gradients_and_settings_are_not_drawn():
    """An index dtype proposal for a gradient list drops the gradients (integer parameters have none); an
    input-insensitive run draws statistics but keeps settings (`eps`, `max_norm`) fixed."""
    from scrapers.harness.containers import scalar_draws
    spec = {"entry": "f", "kind": "function", "attrs": [], "n_attr": 8,
            "args": [{"name": "params", "kind": "tensors", "count": "ws", "shape": ["n"], "grads": True}]}
    cand, _ = entry_candidate("", "f", "function", ["params"])
    err = {"type": "RuntimeError", "msg": "index_select(): Expected dtype int64 for index", "line": "x[params]",
           "in_candidate": True}
    ints = [s["args"][0] for s in propose(spec, err, cand) if s["args"][0].get("dtype") == "int64"]
    assert ints and all("grads" not in a for a in ints)
    floats = {"entry": "f", "kind": "function", "attrs": [], "n_attr": 8,
              "args": [{"name": "eps", "kind": "float", "value": 1e-5}, {"name": "stat", "kind": "float"}]}
    drawn = scalar_draws(floats)[0]["args"]
    assert "draw" not in drawn[0] and drawn[1]["draw"] is True


def test_a_one_dimensional_matmul_operand_is_first_proposed_as_a_matrix():
    """`torch.matmul(ag_out, weight)` with a 1-D weight of the wrong length: the weight first becomes a
    matrix with the right rows (an all-gather + GEMM stays a GEMM), then the 1-D fix."""
    spec = {"args": [{"name": "weight", "kind": "tensor", "shape": ["n"]}], "attrs": []}
    msg = "inconsistent tensor size, expected tensor [16] and src [8] to have the same number of elements"
    fixes = size_fixes(spec, msg, spec["args"], line="out = torch.matmul(ag_out, weight)")
    assert [f["args"][0]["shape"] for f in fixes] == [["n*ws", "n"], ["n*ws"]]
    assert [f["args"][0]["shape"] for f in size_fixes(spec, msg, spec["args"], line="s = (a * weight).sum()")] \
        == [["n*ws"]]


def test_input_copies_keep_parameters_and_their_gradients():
    """The rotated input copies of the timed pass (and the validation's own copies) keep a parameter list's
    gradients: a gradient norm over copies whose gradients were dropped filters every parameter out."""
    from validation.checks import clone_tree
    a = {"name": "params", "kind": "tensors", "count": "ws", "shape": ["n"], "grads": True}
    ps = runtime._mg_value(a, 0, 0, 0, 2, 4, "cpu")
    twin = clone_tree([ps, 3])[0]
    assert all(isinstance(q, torch.nn.Parameter) and torch.equal(p.grad, q.grad) and p.grad is not q.grad
               for p, q in zip(ps, twin))
