"""The task-side harness runtime (scrapers/harness/make/runtime.py): drawing values, hosting scoped to the call,
state outputs, devices of attributes, `dist.reduce` on non-destination ranks, input copies for timing."""

from __future__ import annotations

import os
import sys
import textwrap

import pytest
import torch
import torch.distributed as dist

from mgbench.scrapers.harness.make import runtime
from mgbench.scrapers.harness.make.render import prepare, runtime_source


def test_runtime_placeholder_subscript_and_values(monkeypatch, tmp_path):
    prep = prepare(
        "from repo.types import Awaitable, Codec\n\n\nclass Req(Awaitable[int]):\n    c: Codec | None = None"
        "\n\n\nclass Sub(Req[int]):\n    pass\n"
    )
    ns: dict = {}
    exec(runtime_source() + "\n" + prep.body, ns)
    assert [c.__name__ for c in ns["Sub"].__mro__] == ["Sub", "Req", "_MgBase", "object"]
    val = ns["_mg_value"]
    assert val({"kind": "fn", "value": "noop"}, 0, 0, 0, 2, 8, "cpu")(1, k=2) is None
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    p = val({"kind": "path", "value": "pathlib"}, 0, 0, 1, 2, 8, "cpu")
    assert p == val({"kind": "path", "value": "pathlib"}, 0, 0, 0, 2, 8, "cpu") and p.parent == tmp_path
    assert isinstance(val({"kind": "path", "value": "str"}, 0, 0, 0, 2, 8, "cpu"), str)


def test_a_fill_is_exact_and_a_positive_draw_stays_in_its_range():
    # SyncBN's total_count is exactly N*H*W*ws in the input's dtype; a reciprocal std is never <= 0
    count = {"kind": "tensor", "shape": ["1"], "dtype": "float32", "fill": "n*49*ws", "replicated": True}
    invstd = {"kind": "tensor", "shape": ["n", "4"], "dtype": "bfloat16", "draw": "positive"}
    for rank in range(2):
        assert runtime._mg_value(count, 0, 7, rank, 2, 8, "cpu").tolist() == [8 * 49 * 2]
        t = runtime._mg_value(invstd, 1, 7, rank, 2, 8, "cpu")
        assert t.dtype == torch.bfloat16 and t.shape == (8, 4)
        assert bool((t >= 0.5).all() and (t <= 1.5).all()) and t.unique().numel() > 1


def test_hosting_is_scoped_to_the_call(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setattr(dist, "get_rank", lambda *a: 1)
    monkeypatch.setattr(dist, "get_world_size", lambda *a: 2)
    monkeypatch.setattr(dist, "get_backend", lambda *a: "gloo")
    ns: dict = {}
    exec(runtime_source(), ns)
    init, destroy, argv = dist.init_process_group, dist.destroy_process_group, sys.argv
    with ns["_mg_hosted"]("f"):
        assert sys.argv == ["f"] and dist.init_process_group is not init
        assert (os.environ["RANK"], os.environ["WORLD_SIZE"]) == ("1", "2")
        assert dist.destroy_process_group() is None  # tearing down the world: a no-op
    assert (dist.init_process_group, dist.destroy_process_group, sys.argv) == (init, destroy, argv)
    assert "RANK" not in os.environ
    with pytest.raises(KeyError):  # restored even when the entry raises
        with ns["_mg_hosted"]("f"):
            raise KeyError("x")
    assert dist.init_process_group is init


def test_hosting_swaps_the_module_globals_bound_between_calls(monkeypatch):
    """The names a task module binds to `init_process_group` are swapped during every call, also those bound
    after an earlier call (its globals are scanned once per size, not on every timed call)."""
    monkeypatch.setattr(dist, "get_rank", lambda *a: 0)
    monkeypatch.setattr(dist, "get_world_size", lambda *a: 2)
    monkeypatch.setattr(dist, "get_backend", lambda *a: "gloo")
    ns: dict = {}
    exec(runtime_source(), ns)
    init = dist.init_process_group
    ns["ipg"] = init
    with ns["_mg_hosted"]("f", ns):
        assert ns["ipg"] is not init and dist.init_process_group is not init
    assert ns["ipg"] is init
    ns["ipg_later"] = init  # bound after the first call
    ns["ipg"] = print  # rebound to something else: left alone
    with ns["_mg_hosted"]("f", ns):
        assert ns["ipg_later"] is not init and ns["ipg"] is print
    assert (ns["ipg_later"], ns["ipg"], dist.init_process_group) == (init, print, init)


def test_timing_copies_keep_attributes_set_on_tensors():
    """Timed runs rotate cloned inputs; a synthesized `grad.codecs` / `param.main_grad` must survive the copy
    (torchrec `AllGatherBase_Req` failed its GPU timing with `'Tensor' object has no attribute 'codecs'`)."""
    from mgbench.validation.checks import clone_tree

    x = torch.randn(4)
    x.main_grad = torch.zeros(4)
    x.codecs = None
    (y,) = clone_tree((x,))
    assert y.codecs is None and torch.equal(y.main_grad, x.main_grad) and y.main_grad is not x.main_grad
    assert y.data_ptr() != x.data_ptr()
    buf = torch.zeros(4)
    a, b = torch.ones(2), torch.ones(2)
    a.main_grad, b.main_grad, a.me = buf, buf, a  # shared buffer and a cycle
    a2, b2 = clone_tree([a, b])
    assert a2.main_grad is b2.main_grad and a2.me is a2 and a2.main_grad is not buf


def test_state_output_only_when_nothing_else_holds_a_tensor(one_rank):
    """Without the "state" flag a method's output stays its return value / changed arguments; the object's
    changed attributes are used only when neither holds a tensor."""
    ns: dict = {}
    exec(runtime_source(), ns)
    exec(
        textwrap.dedent("""
        import torch

        class Box:
            def put(self, x):
                self.kept = x * 2
                x.add_(1)
            def stash(self):
                self.kept = torch.ones(3)
    """),
        ns,
    )
    spec = {
        "entry": "Box.put",
        "kind": "method",
        "attrs": [],
        "n_attr": 8,
        "args": [{"name": "x", "kind": "tensor", "shape": ["n"], "dtype": "float32"}],
    }
    import torch

    x = torch.zeros(3)
    assert ns["_mg_call"](ns, spec, (x,)).tolist() == [1.0, 1.0, 1.0] and x.tolist() == [0.0, 0.0, 0.0]
    out = ns["_mg_call"](ns, {**spec, "entry": "Box.stash", "args": []}, ())
    assert out.tolist() == [1.0, 1.0, 1.0]


def test_attributes_and_globals_are_drawn_where_the_inputs_are(one_rank):
    """A method's attributes live on the inputs' device (they were always drawn on the CPU, so on GPU ranks
    `dist.all_gather_into_tensor(self.routing_map)` failed with "Tensors must be CUDA"); checked with the
    meta device, which a CPU-only machine has."""
    import torch

    ns: dict = {}
    exec(runtime_source(), ns)
    exec("class Layer:\n    def forward(self, x):\n        return x + self.w + SCALE\n", ns)
    spec = {
        "entry": "Layer.forward",
        "kind": "method",
        "n_attr": 8,
        "args": [{"name": "x", "kind": "tensor", "shape": ["n"], "dtype": "float32"}],
        "attrs": [{"name": "w", "kind": "tensor", "shape": ["n"], "dtype": "float32"}],
        "globals": [{"name": "SCALE", "kind": "tensor", "shape": ["n"], "dtype": "float32"}],
    }
    out = ns["_mg_call"](ns, spec, (torch.zeros(8, device="meta"),))
    assert out.device.type == "meta"
    assert ns["_mg_device"]([{"a": 1}, (torch.zeros(1, device="meta"),)]).type == "meta"
    assert ns["_mg_device"]([1, "x"]) is None


REDUCE = """import torch
import torch.distributed as dist


def reduce_to_root(x):
    y, z, w = x * 2, x * 3, x * 4
    dist.reduce(y, dst=0)
    dist.reduce(z, 0, dist.ReduceOp.SUM, None, True).wait()         # asynchronous
    dist.reduce(w, None, dist.ReduceOp.SUM, None, False, 0)         # group_dst, positional
    return torch.cat([y, z, w])
"""


def _reduce_rank(rank: int, store: str, q) -> None:
    import torch
    import torch.distributed as dist

    from mgbench.scrapers.harness.make.render import runtime_source

    dist.init_process_group("gloo", store=dist.FileStore(store, 2), rank=rank, world_size=2)
    try:
        ns: dict = {}
        exec(runtime_source(), ns)
        exec(REDUCE, ns)
        spec = {
            "entry": "reduce_to_root",
            "kind": "function",
            "attrs": [],
            "n_attr": 8,
            "args": [{"name": "x", "kind": "tensor", "shape": ["n"], "dtype": "float32"}],
        }
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
    assert got[0][0] == [a + b for a, b in zip(got[0][1], got[1][1])]  # the root has the sum
    assert got[1][0] == got[1][1]  # the other rank its own values


def test_parameter_lists_keep_their_gradients_through_clone_and_output():
    a = {"name": "params", "kind": "tensors", "count": "ws", "shape": ["n"], "grads": True}
    ps = runtime._mg_value(a, 0, 0, 1, 2, 4, "cpu")
    assert len(ps) == 2 and all(isinstance(p, torch.nn.Parameter) and p.grad is not None for p in ps)
    twin = runtime._mg_clone(ps)
    assert all(torch.equal(p.grad, q.grad) and p.grad is not q.grad for p, q in zip(ps, twin))
    plain = runtime._mg_plain(ps)
    assert len(plain) == 4 and torch.equal(plain[1], ps[0].grad)
    other = runtime._mg_value(a, 0, 0, 0, 2, 4, "cpu")  # rank 0 draws different gradients
    assert not torch.equal(other[0].grad, ps[0].grad)


def test_input_copies_keep_parameters_and_their_gradients():
    """The rotated input copies of the timed pass (and the validation's own copies) keep a parameter list's
    gradients: a gradient norm over copies whose gradients were dropped filters every parameter out."""
    from mgbench.validation.checks import clone_tree

    a = {"name": "params", "kind": "tensors", "count": "ws", "shape": ["n"], "grads": True}
    ps = runtime._mg_value(a, 0, 0, 0, 2, 4, "cpu")
    twin = clone_tree([ps, 3])[0]
    assert all(
        isinstance(q, torch.nn.Parameter) and torch.equal(p.grad, q.grad) and p.grad is not q.grad
        for p, q in zip(ps, twin)
    )


def test_a_rank_whose_inputs_are_on_a_gpu_keeps_cuda_placement_over_gloo(monkeypatch):
    """Ranks sharing one GPU run gloo over CUDA tensors: the call must not turn CUDA placement into the CPU
    (a `.cuda()` weight would land on the CPU beside CUDA inputs), yet gloo's buffer forms still apply; a
    CPU rank on gloo still gets the CPU."""
    monkeypatch.setattr(dist, "get_rank", lambda *a: 1)
    monkeypatch.setattr(dist, "get_world_size", lambda *a: 2)
    monkeypatch.setattr(dist, "get_backend", lambda *a: "gloo")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: None)  # no GPU here: the call's own bookkeeping
    ns: dict = {}
    exec(runtime_source(), ns)
    real, gather = torch.cuda.device_count, dist.all_gather_into_tensor
    accelerator = ns["_MgAccelerator"]()  # DeepSpeed/ColossalAI get_accelerator(): mined code places buffers by it
    with ns["_mg_hosted"]("f", ns, torch.device("cuda", 0)):
        assert torch.cuda.device_count is real and os.environ["LOCAL_RANK"] == "0"
        assert dist.all_gather_into_tensor is not gather  # gloo still takes NCCL's stacked buffer forms
        assert accelerator.get_current_device() == torch.device("cuda")
    assert dist.all_gather_into_tensor is gather
    assert accelerator.device_name() == "cpu"
    with ns["_mg_hosted"]("f", ns, torch.device("cpu")):
        assert torch.cuda.device_count is not real and os.environ["LOCAL_RANK"] == "1"
        assert accelerator.get_current_device() == torch.device("cpu")
