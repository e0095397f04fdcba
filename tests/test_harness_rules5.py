"""Harness rules of session 5: methods that work on their object's state, names a mined file gets through
`from M import *`, and class-level statements that name methods (`state = property(_get_state, ...)`)."""
from __future__ import annotations

import textwrap

import pytest

from scrapers.harness.render import runtime_source
from scrapers.harness.search import Budget, synthesize
from tests.harness_cases import CASES, candidate, entry_candidate

FAST = Budget(seconds=40, attempts=14, attempt_timeout_s=6, mem_mb=512)

BUCKET = '''import torch
import torch.distributed as dist


class GradBucket:
    def sync(self):
        dist.all_reduce(self.grad_data)
        self.grad_data /= dist.get_world_size()
        self.synced = self.grad_data.sum()
'''


def _method(text: str, entry: str) -> tuple[dict, str]:
    """A method candidate (`Class.method`, taking only `self`)."""
    return entry_candidate(text, entry, "method", ["self"])


def test_method_on_object_state_takes_its_tensor_attributes_as_inputs():
    """`bucket.sync()` returns nothing and takes no tensors: its output is the state it changed, and its tensor
    attributes become per-rank inputs (seeded like arguments), so the task is input-sensitive."""
    res = synthesize(*_method(BUCKET, "GradBucket.sync"), FAST, print)
    assert res.accepted, (res.reason, res.last_error)
    assert res.spec["state"] is True and [a["name"] for a in res.spec["attrs"]] == ["grad_data"]
    ns: dict = {}
    exec(runtime_source(), ns)
    a = ns["_mg_inputs"](res.spec, 0, 2, 0, "cpu", 8)
    b = ns["_mg_inputs"](res.spec, 1, 2, 0, "cpu", 8)
    c = ns["_mg_inputs"](res.spec, 0, 2, 1, "cpu", 8)
    assert len(a) == 1 and not a[0].equal(b[0]) and not a[0].equal(c[0])


DDP = '''import torch
import torch.distributed as dist


class DataParallel:
    def broadcast_params(self):
        for param in self.module.parameters():
            dist.broadcast(param.data, src=0)
'''


def test_method_on_a_wrapped_model_takes_the_model_as_input():
    """Megatron `DistributedDataParallel.broadcast_params`: `self.module` is a model whose parameters are
    per-rank inputs, and the broadcast parameters are the output."""
    res = synthesize(*_method(DDP, "DataParallel.broadcast_params"), FAST)
    assert res.accepted, (res.reason, res.last_error)
    assert res.spec["state"] is True and res.spec["attrs"][0]["kind"] == "module"


def test_state_output_only_when_nothing_else_holds_a_tensor(one_rank):
    """Without the "state" flag a method's output stays its return value / changed arguments; the object's
    changed attributes are used only when neither holds a tensor."""
    ns: dict = {}
    exec(runtime_source(), ns)
    exec(textwrap.dedent('''
        import torch

        class Box:
            def put(self, x):
                self.kept = x * 2
                x.add_(1)
            def stash(self):
                self.kept = torch.ones(3)
    '''), ns)
    spec = {"entry": "Box.put", "kind": "method", "attrs": [], "n_attr": 8,
            "args": [{"name": "x", "kind": "tensor", "shape": ["n"], "dtype": "float32"}]}
    import torch
    x = torch.zeros(3)
    assert ns["_mg_call"](ns, spec, (x,)).tolist() == [1.0, 1.0, 1.0] and x.tolist() == [0.0, 0.0, 0.0]
    out = ns["_mg_call"](ns, {**spec, "entry": "Box.stash", "args": []}, ())
    assert out.tolist() == [1.0, 1.0, 1.0]


STAR_FILES = {
    "pkg/__init__.py": "",
    "pkg/common.py": "import torch\nfrom torch import Tensor\n\nBATCH = 4\n\n\ndef check_equal(a, b):\n"
                     "    assert torch.allclose(a, b)\n",
    "pkg/test_layer.py": "from pkg.common import *\n\n\ndef test_layer(x):\n    check_equal(x, x)\n"
                         "    return x[:BATCH]\n",
}


def test_names_from_the_candidates_own_star_import_are_inlined(tmp_path):
    """A mined file that gets `torch`, `BATCH` and `check_equal` through `from pkg.common import *`: the
    scraper reports them unresolved; the inliner binds them from the star-imported module (the DeepSpeed
    ZeRO-3 optimizer got `torch` and `Tensor` this way and failed with NameError)."""
    from scrapers.harness.inline import inline_candidate
    from scrapers.harness.splice import apply
    from tests.test_harness_inline import _candidate
    for rel, text in STAR_FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    cand = _candidate("test_layer")
    cand["provenance"]["path"] = "pkg/test_layer.py"
    cand["unresolved"] = ["BATCH", "Tensor", "check_equal", "nowhere", "torch"]
    module = "def test_layer(x):\n    check_equal(x, x)\n    return x[:BATCH]\n"
    rec = inline_candidate(cand, module, tmp_path)
    assert sorted(rec.names) == ["BATCH", "Tensor", "check_equal", "torch"]
    ns: dict = {}
    exec(apply(module, rec), ns)
    import torch
    assert ns["test_layer"](torch.arange(6)).tolist() == [0, 1, 2, 3]


def test_script_style_star_import_and_private_names(tmp_path):
    """Tests import helpers script-style (`from unit.simple_model import *`, no package): found relative to
    the file; a `_private` name is not exported by `import *` and stays unresolved."""
    from scrapers.harness.inline import inline_candidate
    from tests.test_harness_inline import _candidate
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    (tmp_path / "tests" / "unit" / "simple_model.py").write_text("import torch\n\nSCALE = 3\n_HIDDEN = 1\n")
    (tmp_path / "tests" / "unit" / "test_it.py").write_text("from unit.simple_model import *\n")
    cand = _candidate("test_it")
    cand["provenance"]["path"] = "tests/unit/test_it.py"
    cand["unresolved"] = ["SCALE", "_HIDDEN"]
    rec = inline_candidate(cand, "def test_it(x):\n    return x * SCALE + _HIDDEN\n", tmp_path)
    assert rec.names == ["SCALE"] and rec.spans[0]["path"] == "tests/unit/simple_model.py"


def test_class_level_statements_keep_the_methods_they_name():
    """`loss_scale = property(_get_loss_scale, _set_loss_scale)` in a class body: extracting any method of
    the class keeps the two accessors (they were pruned and left unresolved, a NameError at class creation)."""
    from scrapers.extract import ExtractConfig, extract_source
    src = textwrap.dedent('''
        import torch
        import torch.distributed as dist

        class Optim:
            def __init__(self):
                self.scale = 1.0

            def _get_loss_scale(self):
                return self.scale

            def _set_loss_scale(self, v):
                self.scale = v

            loss_scale = property(_get_loss_scale, _set_loss_scale)

            def unrelated(self):
                return 0

            def reduce(self, x):
                dist.all_reduce(x)
                return x
    ''')
    units = extract_source(src.encode(), "pkg/optim.py", ExtractConfig()).units
    (u,) = [u for u in units if u.qualname == "Optim.reduce"]
    assert "def _get_loss_scale" in u.module_source and "def _set_loss_scale" in u.module_source
    assert "def unrelated" not in u.module_source and not u.unresolved and u.compiles



def test_torch_distributed_nn_used_as_an_attribute_is_imported():
    """`dist.nn.functional.all_gather(x)` works in a repository that imported `torch.distributed.nn` somewhere
    else; the extracted module gets the import (it failed with "no attribute 'nn'")."""
    from scrapers.harness.render import prepare
    body = prepare("import torch\nimport torch.distributed as dist\n\n\ndef f(x):\n"
                   "    return dist.nn.functional.all_gather(x)\n").body
    assert body.startswith("import torch.distributed.nn")
    assert "torch.distributed.nn" not in prepare("import torch\n\n\ndef f(x):\n    return x.nn\n").body


SHAPED = ('''import pytest
import torch
import torch.distributed as dist


@pytest.mark.parametrize("shape", [(2, 4), (4, 2)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_reduce_shaped(x, shape, dtype):
    y = x.to(dtype).reshape(shape[0], -1)
    dist.all_reduce(y)
    return y
''', ["x", "shape", "dtype"])


def test_parametrized_test_starts_from_its_first_case(monkeypatch):
    """A parametrized test gets the values it was written for (first case of each decorator) instead of
    name-based guesses; literals only, tuples as lists, `torch.<dtype>` as a dtype."""
    monkeypatch.setitem(CASES, "shaped", SHAPED)
    cand, text = candidate("shaped")
    cand["decorators"] = ['pytest.mark.parametrize("shape", [(2, 4), (4, 2)])',
                          'pytest.mark.parametrize("dtype", [torch.float64, torch.float32])']
    res = synthesize(cand, text, FAST)
    assert res.accepted, (res.reason, res.last_error)
    assert res.spec["args"][1:] == [{"name": "shape", "kind": "literal", "value": [2, 4]},
                                    {"name": "dtype", "kind": "dtype", "value": "float64"}]
    assert res.attempts <= 2          # accepted at world size 2 on the first try (then world size 4)


@pytest.mark.parametrize("decorators,expected", [
    (["pytest.mark.parametrize('tp,pp', [(2, 1), (1, 1)])"], {"tp": 2, "pp": 1}),
    (["pytest.mark.parametrize(('a', 'b'), [pytest.param(3, None, id='x')])"], {"a": 3, "b": None}),
    (['parameterize("async_op", [True, False])'], {"async_op": True}),
    (["pytest.mark.parametrize('n', [8 * 7])", "pytest.mark.parametrize('m', CASES)",
      "pytest.mark.parametrize('k', [])", "functools.lru_cache(None)", "pytest.mark.parametrize(NAMES, [(1, 2)])",
      "pytest.mark.parametrize('f', [torch.randn])", "pytest.mark.parametrize('e', [...])",
      "pytest.mark.parametrize('i', [1e999])", "pytest.mark.parametrize('d', [{1: 2}])",
      "pytest.mark.parametrize('fixture', ['a'], indirect=True)"], {}),
    (["pytest.mark.parametrize('d', [{'a': (1, 2)}])"], {"d": {"a": [1, 2]}}),
])
def test_parametrize_cases(decorators, expected):
    """Only values that survive the spec's JSON round trip unchanged; names given as a variable, non-dtype
    `torch.` attributes, Ellipsis, infinities, int-keyed dicts and fixtures (`indirect=`) are skipped."""
    from scrapers.harness.cases import parametrized
    assert parametrized({"decorators": decorators}) == expected


def test_parametrized_world_sizes_ranks_and_groups_stay_the_harnesss():
    from scrapers.harness.guess import initial_spec
    cand = {"entry": "t", "kind": "function", "params": [{"name": n, "kind": "positional"} for n in
                                                         ("world_size", "src_rank", "group", "tp")],
            "decorators": ["pytest.mark.parametrize('world_size,src_rank,group,tp', [(1, 3, 'x', 2)])"]}
    assert [a.get("expr", a.get("value")) for a in initial_spec(cand)["args"]] == ["ws", "0", "world", "2"]


def test_repository_logger_factory_logs_nothing():
    """ColossalAI `logger = get_dist_logger(); logger.info(msg, ranks=[0])`: the factory stood in by a logger
    whose methods accept anything (it returned None, and `.info` failed the candidate)."""
    from scrapers.harness.render import stand_in
    expr, works = stand_in("colossalai.logging", "get_dist_logger")
    ns: dict = {}
    exec(runtime_source(), ns)
    logger = eval(expr, ns)()
    assert works and logger.info("x", ranks=[0]) is None and logger.warning("y") is None


NCCL_NAMED = '''import torch
import torch.distributed as dist


class NCCLAllGatherDispatcher:
    def token_dispatch(self, hidden):
        out = [torch.empty_like(hidden) for _ in range(self.ep_size)]
        dist.all_gather(out, hidden)
        return torch.cat(out)
'''


def test_a_class_named_after_nccl_is_not_a_gpu_need():
    """`'NCCLAllGatherDispatcher' object has no attribute 'ep_size'` is a missing attribute (searched), not a
    GPU requirement: GPU words count only outside quoted names."""
    cand, text = _method(NCCL_NAMED, "NCCLAllGatherDispatcher.token_dispatch")
    cand["params"].append({"name": "hidden", "kind": "positional", "annotation": None, "default": None})
    res = synthesize(cand, text, FAST)
    assert not res.reason.startswith("needs_gpu"), res.reason
    assert res.accepted and res.spec["attrs"][0]["name"] == "ep_size", (res.reason, res.last_error)


def test_one_entry_per_rank_sizes():
    """Parallel sizes (`ep_size`, `tp_size`, `group_size`) are guessed as the world size, other sizes as n;
    `expected length 2, got 8` from a gather proposes the world size for a guessed int / list count."""
    from scrapers.harness.guess import guess_arg
    from scrapers.harness.mutate import propose
    assert [guess_arg(n, None, None)["expr"] for n in ("ep_size", "tp_world_size", "group_size", "nranks",
                                                       "num_ranks", "hidden_size", "src_rank")] \
        == ["ws", "ws", "ws", "ws", "ws", "n", "0"]
    spec = {"entry": "f", "kind": "function", "attrs": [], "n_attr": 8,
            "args": [{"name": "k", "kind": "int", "expr": "n"}]}
    err = {"type": "RuntimeError", "line": "dist.all_gather(out, x)",
           "msg": "ProcessGroupGloo::allgather: invalid output tensor list at index 0 (expected length 2, got 8)"}
    assert propose(spec, err, {"params": [], "kind": "function"})[0]["args"][0]["expr"] == "ws"


SKIPPING = ('''import pytest
import torch
import torch.distributed as dist


def test_needs_eight(x):
    if dist.get_world_size() != 8:
        pytest.skip("This test specifically requires 8 GPUs")
    dist.all_reduce(x)
    return x
''', ["x"])


def test_a_test_that_skips_itself_is_reported_as_skipped(monkeypatch):
    """`pytest.skip(reason)` is the test's own decision, reported with its reason (it used to read as a
    missing import `pytest.skip`)."""
    monkeypatch.setitem(CASES, "skipping", SKIPPING)
    res = synthesize(*candidate("skipping"), FAST)
    assert res.reason == "skipped_by_test: This test specifically requires 8 GPUs" and res.attempts == 1


def test_attributes_and_globals_are_drawn_where_the_inputs_are(one_rank):
    """A method's attributes live on the inputs' device (they were always drawn on the CPU, so on GPU ranks
    `dist.all_gather_into_tensor(self.routing_map)` failed with "Tensors must be CUDA"); checked with the
    meta device, which a CPU-only machine has."""
    import torch
    ns: dict = {}
    exec(runtime_source(), ns)
    exec("class Layer:\n    def forward(self, x):\n        return x + self.w + SCALE\n", ns)
    spec = {"entry": "Layer.forward", "kind": "method", "n_attr": 8,
            "args": [{"name": "x", "kind": "tensor", "shape": ["n"], "dtype": "float32"}],
            "attrs": [{"name": "w", "kind": "tensor", "shape": ["n"], "dtype": "float32"}],
            "globals": [{"name": "SCALE", "kind": "tensor", "shape": ["n"], "dtype": "float32"}]}
    out = ns["_mg_call"](ns, spec, (torch.zeros(8, device="meta"),))
    assert out.device.type == "meta"
    assert ns["_mg_device"]([{"a": 1}, (torch.zeros(1, device="meta"),)]).type == "meta"
    assert ns["_mg_device"]([1, "x"]) is None


def test_importorskip_returns_the_submodule_or_skips():
    """`fsdp = pytest.importorskip("torch.distributed.fsdp")` is the submodule (not `torch`); a torch module
    that does not exist skips the test like pytest; other packages stay missing imports."""
    ns: dict = {}
    exec(runtime_source(), ns)
    pt = ns["_MgPytest"]()
    assert pt.importorskip("torch.distributed.fsdp").__name__ == "torch.distributed.fsdp"
    with pytest.raises(RuntimeError, match="mgbench-skipped-by-test: could not import 'torch.no_such_mod'"):
        pt.importorskip("torch.no_such_mod")
    with pytest.raises(ImportError, match="mgbench-missing-import: numpy"):
        pt.importorskip("numpy").zeros(3)
