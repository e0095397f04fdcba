"""Harness rules of session 6: module globals left None (`g_mpu = None`), loop variables over a list of model
chunks, and methods of `nn.Module` subclasses (whose own `__init__` the harness does not run)."""
from __future__ import annotations

from scrapers.harness.mutate import propose
from scrapers.harness.search import Budget, synthesize
from scrapers.harness.specedit import loop_aliases
from tests.harness_cases import entry_candidate
from tests.test_harness_rules5 import _method

FAST = Budget(seconds=40, attempts=14, attempt_timeout_s=6, mem_mb=512, ws4_attempts=0)

GLOBAL_MPU = '''import torch
import torch.distributed as dist

g_mpu = None


def _gather(input_):
    group = g_mpu.get_model_parallel_group()
    out = [torch.empty_like(input_) for _ in range(dist.get_world_size(group=group))]
    dist.all_gather(out, input_, group=group)
    return torch.cat(out)
'''

CHUNKS = '''import torch
import torch.distributed as dist


def calc_norm(model):
    if not isinstance(model, list):
        model = [model]
    total = torch.zeros(1)
    for model_chunk in model:
        for param in model_chunk.parameters():
            total += param.detach().float().pow(2).sum()
    dist.all_reduce(total)
    return total.sqrt()
'''

WRAPPER = '''import torch
import torch.distributed as dist


class ShardedWrapper(torch.nn.Module):
    def broadcast_params(self):
        group = self.dist_index.get_dp_group()
        for param in self.module.parameters():
            dist.broadcast(param.data, src=0, group=group)
'''


def _function(text: str, entry: str, params: list[str]) -> tuple[dict, str]:
    return entry_candidate(text, entry, "function", params)


def test_a_module_global_left_none_becomes_a_parallel_state():
    """DeepSpeed `g_mpu = None` set by an init function elsewhere: `g_mpu.get_model_parallel_group()` gets
    the parallel-state stand-in (every group the world), as a module global of the harness."""
    res = synthesize(*_function(GLOBAL_MPU, "_gather", ["input_"]), FAST)
    assert res.accepted, (res.reason, res.last_error)
    assert res.spec["globals"] == [{"name": "g_mpu", "kind": "group", "value": "state"}]


def test_none_attribute_that_is_not_a_getter_is_not_a_parallel_state():
    err = {"type": "AttributeError", "msg": "'NoneType' object has no attribute 'hidden_size'",
           "line": "h = cfg.hidden_size * 2", "in_candidate": True}
    cand, _ = _function("", "f", ["x"])
    cand["_text"] = "cfg = None\n"
    specs = propose({"entry": "f", "kind": "function", "args": [], "attrs": [], "n_attr": 8}, err, cand)
    added = [g for s in specs for g in s.get("globals", [])]
    assert added and all(g["kind"] == "namespace" for g in added)
    cand["_text"] = "def f(x):\n    cfg = x.get('cfg')\n"          # a local, not a module global: no global
    specs = propose({"entry": "f", "kind": "function", "args": [], "attrs": [], "n_attr": 8}, err, cand)
    assert not [g for s in specs for g in s.get("globals", [])]


def test_loop_variable_over_an_argument_makes_it_a_list_of_models():
    """Megatron `for model_chunk in model: model_chunk.parameters()`: `model` is a list of models."""
    assert loop_aliases("for i, chunk in enumerate(model):\n    for p in chunk.parameters():") == {"chunk": "model"}
    res = synthesize(*_function(CHUNKS, "calc_norm", ["model"]), FAST)
    assert res.accepted, (res.reason, res.last_error)
    assert res.spec["args"][0]["kind"] == "module" and res.spec["args"][0]["chunks"] == 2


def test_method_of_a_module_subclass_gets_submodules_and_a_parallel_state():
    """A `torch.nn.Module` subclass built without its `__init__` still accepts a model attribute (Module's
    own machinery is initialised), `self.dist_index.get_dp_group()` is a parallel-state object, and the
    broadcast parameters of the submodule are the output."""
    res = synthesize(*_method(WRAPPER, "ShardedWrapper.broadcast_params"), FAST)
    assert res.accepted, (res.reason, res.last_error)
    kinds = {a["name"]: (a["kind"], a.get("value")) for a in res.spec["attrs"]}
    assert kinds == {"module": ("module", None), "dist_index": ("group", "state")} and res.spec["state"] is True


def test_accelerator_memory_statistics_rng_and_events_on_a_cpu_rank(one_rank):
    """DeepSpeed's `see_memory_usage` and timers ask `get_accelerator()` for memory statistics, RNG state and
    events: on a CPU rank they are zeros, the CPU generator's state and a no-op event."""
    import torch

    from scrapers.harness.render import runtime_source
    ns: dict = {}
    exec(runtime_source(), ns)
    acc = ns["_MgAccelerator"]()
    assert acc.memory_reserved() == 0 and acc.max_memory_allocated() == 0 and acc.memory_stats() == {}
    assert acc.reset_peak_memory_stats() is None
    state = acc.get_rng_state()
    a = torch.rand(3)
    acc.set_rng_state(state)
    assert torch.equal(a, torch.rand(3))
    ev = acc.Event(enable_timing=True)
    ev.record()
    assert ev.elapsed_time(acc.Event()) == 0.0
    try:
        acc.no_such_method
    except ImportError as e:
        assert "mgbench-missing-import: accelerator.no_such_method" in str(e)
    else:
        raise AssertionError("an unknown accelerator method must stay a missing import")


NESTED = '''import torch
import torch.distributed as dist


def _broadcast_nested(nested):
    for k, v in nested.items():
        dist.broadcast(v, src=0)
    return nested


def broadcast_batch(nested_dict):
    return _broadcast_nested(nested_dict)
'''

SPLIT_FIRST = '''import torch
import torch.distributed as dist


def split_first(inputs, tesseract_dim):
    out = inputs.chunk(tesseract_dim, dim=0)[dist.get_rank() % tesseract_dim].contiguous()
    dist.all_reduce(out)
    return out
'''

ABSTRACT = '''import abc
import torch
import torch.distributed as dist


class Awaitable(abc.ABC):
    @abc.abstractmethod
    def _wait_impl(self):
        ...


class AllToAllAwaitable(Awaitable):
    def start(self, x, device):
        out = torch.empty(x.shape, device=device)
        dist.all_to_all_single(out, x)
        return out
'''


def test_a_dict_used_through_a_helper_gets_per_rank_tensor_entries():
    """`nested.items()` inside a helper: the tensor argument named like a dict becomes a dict with two
    per-rank tensor entries (an empty dict would communicate nothing)."""
    res = synthesize(*_function(NESTED, "broadcast_batch", ["nested_dict"]), FAST)
    assert res.accepted, (res.reason, res.last_error)
    a = res.spec["args"][0]
    assert a["dict"] and [f["name"] for f in a["fields"]] == ["w0", "w1"]
    assert not any(f.get("replicated") for f in a["fields"])


def test_a_count_guessed_as_zero_is_retried_as_a_size():
    """`tesseract_dim` looks like a dimension index (0) but is a chunk count: `chunks ... got: 0` retries it."""
    res = synthesize(*_function(SPLIT_FIRST, "split_first", ["inputs", "tesseract_dim"]), FAST)
    assert res.accepted, (res.reason, res.last_error)
    assert res.spec["args"][1]["expr"] in ("ws", "n")


def test_concrete_method_of_an_abstract_class_and_a_device_argument():
    """torchrec's awaitables: the class leaves an abstract method undefined (the harness builds it anyway);
    `device` is the rank's device, not a tensor."""
    cand, text = _method(ABSTRACT, "AllToAllAwaitable.start")
    cand["params"] += [{"name": p, "kind": "positional", "annotation": None, "default": None} for p in ("x", "device")]
    res = synthesize(cand, text, FAST)
    assert res.accepted, (res.reason, res.last_error)
    assert [a["kind"] for a in res.spec["args"]] == ["tensor", "device"]


def test_pipeline_stage_questions_of_the_parallel_state_stand_ins():
    """The pipeline is the world: rank 1 of 2 is the last stage, not the first."""
    import types

    from scrapers.harness.render import runtime_source
    ns: dict = {}
    exec(runtime_source(), ns)
    ns["_mg_dist"] = types.SimpleNamespace(get_rank=lambda *a: 1, get_world_size=lambda *a: 2)
    mpu, gpc = ns["_MgParallelState"](), ns["_MgGlobalContext"]()
    assert not mpu.is_pipeline_first_stage(ignore_virtual=True) and mpu.is_pipeline_last_stage()
    assert not gpc.is_pipeline_first_stage() and gpc.is_pipeline_last_stage()


REDUCE = '''import torch
import torch.distributed as dist


def reduce_to_root(x):
    y, z, w = x * 2, x * 3, x * 4
    dist.reduce(y, dst=0)
    dist.reduce(z, 0, dist.ReduceOp.SUM, None, True).wait()         # asynchronous
    dist.reduce(w, None, dist.ReduceOp.SUM, None, False, 0)         # group_dst, positional
    return torch.cat([y, z, w])
'''


def _reduce_rank(rank: int, store: str, q) -> None:
    import torch
    import torch.distributed as dist

    from scrapers.harness.render import runtime_source
    dist.init_process_group("gloo", store=dist.FileStore(store, 2), rank=rank, world_size=2)
    try:
        ns: dict = {}
        exec(runtime_source(), ns)
        exec(REDUCE, ns)
        spec = {"entry": "reduce_to_root", "kind": "function", "attrs": [], "n_attr": 8,
                "args": [{"name": "x", "kind": "tensor", "shape": ["n"], "dtype": "float32"}]}
        x = torch.arange(64, dtype=torch.float32) + rank
        q.put((rank, ns["_mg_call"](ns, spec, (x,)).tolist(), torch.cat([x * 2, x * 3, x * 4]).tolist()))
    finally:
        dist.destroy_process_group()


def test_dist_reduce_leaves_non_destination_ranks_their_own_values(tmp_path):
    """`dist.reduce` leaves the buffer of a non-destination rank unspecified (gloo overwrites it, NCCL does
    not): during the entry's call those ranks get their own values back (also for an asynchronous reduce and
    a positional `group_dst`), so the task's output is defined."""
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_reduce_rank, args=(r, str(tmp_path / "store"), q)) for r in range(2)]
    for p in procs:
        p.start()
    got = dict((r, (out, own)) for r, out, own in (q.get(timeout=60) for _ in procs))
    for p in procs:
        p.join(30)
    assert got[0][0] == [a + b for a, b in zip(got[0][1], got[1][1])]      # the root has the sum
    assert got[1][0] == got[1][1]                                          # the other rank its own values


SCRATCH = '''import torch
import torch.distributed as dist

_CACHE = {}


def stage_chunk(x):
    buf = _CACHE.setdefault(tuple(x.shape), torch.empty(x.shape))
    buf.copy_(x)
    handle = dist.all_reduce(buf, async_op=True)
    return buf, handle
'''


def test_an_output_that_later_calls_overwrite_is_rejected():
    """Megatron `_stage_topk_target_chunk` returns a module-level scratch buffer: the next call overwrites the
    previous output, so a task's reference output would change under the comparison. The returned handle is
    waited on before the output is read."""
    res = synthesize(*_function(SCRATCH, "stage_chunk", ["x"]), FAST)
    assert not res.accepted and res.reason == "output_overwritten_by_later_calls", res.reason
    ok = synthesize(*_function(SCRATCH.replace("_CACHE.setdefault(tuple(x.shape), torch.empty(x.shape))",
                                               "torch.empty(x.shape)"), "stage_chunk", ["x"]), FAST)
    assert ok.accepted, (ok.reason, ok.last_error)
