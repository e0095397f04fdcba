"""libcst extraction: alias resolution, process-group methods, references, scope closure, lines."""

from __future__ import annotations

import keyword
import textwrap

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mgbench.scrapers.extract import ExtractConfig, extract_source

CFG = ExtractConfig(facades={"deepspeed.comm": "torch.distributed"})


def run(src: str, path: str = "pkg/mod.py", cfg: ExtractConfig = CFG):
    return extract_source(textwrap.dedent(src).encode(), path, cfg)


def ops(src: str, path: str = "pkg/mod.py") -> list[tuple[str, str]]:
    res = run(src, path)
    return [(c.op, c.qualname) for u in res.units for c in u.calls]


STYLES = {
    "module_alias": ("import torch.distributed as {a}", "{a}.{op}(x)", "torch.distributed.{op}"),
    "from_torch": ("from torch import distributed as {a}", "{a}.{op}(x)", "torch.distributed.{op}"),
    "from_import_as": ("from torch.distributed import {op} as {a}", "{a}(x)", "torch.distributed.{op}"),
    "c10d_module": (
        "import torch.distributed.distributed_c10d as {a}",
        "{a}.{op}(x)",
        "torch.distributed.distributed_c10d.{op}",
    ),
    "assign_alias": (
        "import torch.distributed as dist\n{a} = dist.distributed_c10d",
        "{a}.{op}(x)",
        "torch.distributed.distributed_c10d.{op}",
    ),
    "plain_torch": ("import torch as {a}", "{a}.distributed.{op}(x)", "torch.distributed.{op}"),
    "star": ("from torch.distributed import *", "{op}(x)", "torch.distributed.{op}"),
    "local_import": ("", "import torch.distributed as {a}\n    {a}.{op}(x)", "torch.distributed.{op}"),
}
OPS = [
    "all_reduce",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "all_to_all_single",
    "broadcast",
    "isend",
    "irecv",
    "send",
    "recv",
    "_all_gather_base",
    "gather",
    "scatter",
]
alias = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True).filter(
    lambda s: not keyword.iskeyword(s) and s not in {"x", "f", "torch", "print", "len"}
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(style=st.sampled_from(sorted(STYLES)), a=alias, op=st.sampled_from(OPS))
def test_every_alias_spelling_resolves(style, a, op):
    imp, call, qual = STYLES[style]
    src = f"{imp.format(a=a, op=op)}\n\n\ndef f(x):\n    {call.format(a=a, op=op)}\n    return x\n"
    res = extract_source(src.encode(), "pkg/mod.py", CFG)
    assert [(c.op, c.qualname) for u in res.units for c in u.calls] == [(op, qual.format(op=op))], src
    assert res.units[0].compiles


@settings(max_examples=30, deadline=None)
@given(a=alias, op=st.sampled_from(OPS))
def test_a_parameter_shadows_the_alias(a, op):
    src = f"import torch.distributed as {a}\n\ndef f({a}, x):\n    {a}.{op}(x)\n"
    assert extract_source(src.encode(), "pkg/mod.py", CFG).status == "no_collectives"


def test_functional_autograd_ops_symm_mem_and_facades():
    found = ops("""
        import torch
        import torch.distributed._functional_collectives as funcol
        from torch.distributed.nn.functional import all_gather as ag
        from torch.distributed import _symmetric_memory as symm_mem
        from deepspeed import comm as dsdist

        def f(x, w, group):
            a = funcol.all_gather_tensor(x, 0, group)
            b = funcol.reduce_scatter_tensor(x, "sum", 0, group)
            c = ag(x)
            d = torch.ops._c10d_functional.all_reduce.default(x, "sum", "0")
            e = symm_mem.fused_all_gather_matmul(x, [w], 0, "0")
            dsdist.all_reduce(x)
            return a, b, c, d, e
    """)
    assert found == [
        ("all_gather_tensor", "torch.distributed._functional_collectives.all_gather_tensor"),
        ("reduce_scatter_tensor", "torch.distributed._functional_collectives.reduce_scatter_tensor"),
        ("all_gather", "torch.distributed.nn.functional.all_gather"),
        ("all_reduce", "torch.ops._c10d_functional.all_reduce.default"),
        ("fused_all_gather_matmul", "torch.distributed._symmetric_memory.fused_all_gather_matmul"),
        ("all_reduce", "torch.distributed.all_reduce"),
    ]
    calls = (
        run("""
        from deepspeed import comm as dist
        def f(x):
            dist.all_reduce(x)
    """)
        .units[0]
        .calls
    )
    assert calls[0].via == "facade"


def test_process_group_methods_where_resolvable():
    res = run("""
        from typing import Optional
        import torch.distributed as dist
        from torch.distributed import ProcessGroup

        def annotated(x, group: Optional[ProcessGroup] = None):
            group.allreduce([x]).wait()

        def from_factory(x):
            pg = dist.new_group([0, 1])
            pg.broadcast([x], 0)
            dist.group.WORLD.allgather([[x]], [x])

        def by_name_only(x, tp_group):
            tp_group.allreduce([x])
            tp_group.broadcast([x], 0)          # ambiguous method on an unproven receiver: not reported

        def not_a_group(x, comm):
            comm.allreduce(x)                   # mpi4py-style receiver: not reported

        class Layer:
            def __init__(self):
                self.pg = dist.new_group()

            def forward(self, x):
                self.pg.broadcast([x], 0)
                return x
    """)
    by = {u.qualname: [(c.op, c.certainty) for c in u.calls] for u in res.units}
    assert by == {
        "annotated": [("all_reduce", "resolved")],
        "from_factory": [("broadcast", "resolved"), ("all_gather", "resolved")],
        "by_name_only": [("all_reduce", "heuristic")],
        "Layer.forward": [("broadcast", "resolved")],
    }


def test_references_and_aliases_are_counted_once():
    res = run("""
        import torch.distributed as dist
        _gather = dist.all_gather_into_tensor

        def ring(x, peer):
            ops = [dist.P2POp(dist.isend, x, peer), dist.P2POp(dist.irecv, x, peer)]
            for r in dist.batch_isend_irecv(ops):
                r.wait()
            fn = dist.reduce_scatter_tensor
            fn(x, x)
            ag = dist.all_gather_into_tensor if hasattr(dist, "all_gather_into_tensor") else None
            ag(x, x)
            _gather(x, x)
            dist.all_reduce = None                  # monkeypatching is not a use
            return [dist.all_reduce, group_wrapper(fct=self_group.allgather)]
    """)
    kinds = [(c.op, c.kind, c.via) for c in res.units[0].calls]
    assert kinds == [
        ("P2POp", "call", "import"),
        ("P2POp", "call", "import"),
        ("batch_isend_irecv", "call", "import"),
        ("reduce_scatter_tensor", "call", "assign"),
        ("all_gather_into_tensor", "call", "assign"),
        ("all_gather_into_tensor", "call", "assign"),
        ("all_reduce", "reference", "import"),
        ("all_gather", "reference", "process_group"),
    ]


def test_relative_imports_inside_torch_and_local_defs():
    src = """
        from .distributed_c10d import all_reduce, _get_default_group

        def all_reduce_twice(x):
            all_reduce(x)
            _get_default_group().allreduce([x])
    """
    calls = run(src, "torch/distributed/helpers.py").units[0].calls
    assert [(c.qualname, c.via) for c in calls] == [
        ("torch.distributed.distributed_c10d.all_reduce", "relative"),
        ("torch.distributed.ProcessGroup.allreduce", "process_group"),
    ]
    assert run(src, "elsewhere/helpers.py").status == "no_collectives"


def test_scope_closure_emits_a_standalone_module():
    res = run('''
        """Module doc."""
        from __future__ import annotations
        import math, os, sys
        import torch
        import torch.distributed as dist
        from typing import Optional, Dict

        CHUNK = 4
        UNUSED = 99
        _GROUP = None

        def _chunks(n):
            return math.ceil(n / CHUNK)

        def unrelated():
            return os.getcwd()

        class Helper:
            scale = 2.0

        def reduce_chunks(x: torch.Tensor, group: Optional[dist.ProcessGroup] = None) -> torch.Tensor:
            """Reduce in chunks."""
            out = []
            for c in x.chunk(_chunks(x.numel())):
                c = c * Helper.scale
                dist.all_reduce(c, group=group or _GROUP)
                out.append(c)
            return torch.cat(out)
    ''')
    (u,) = res.units
    src = u.module_source
    assert u.compiles and u.entry == "reduce_chunks"
    assert "from __future__ import annotations" in src.splitlines()[0]
    for needed in (
        "import math",
        "CHUNK = 4",
        "def _chunks",
        "class Helper",
        "_GROUP = None",
        "from typing import Optional\n",
    ):
        assert needed in src, needed
    for dropped in ("UNUSED", "def unrelated", "import os", "Dict", "Module doc"):
        assert dropped not in src, dropped
    assert u.helpers == ["CHUNK", "Helper", "_GROUP", "_chunks"]
    assert u.uses_globals == ["_GROUP"]
    assert [(p.name, p.annotation, p.default) for p in u.params] == [
        ("x", "torch.Tensor", None),
        ("group", "Optional[dist.ProcessGroup]", "None"),
    ]
    assert u.returns == "torch.Tensor" and u.docstring == "Reduce in chunks."
    ns: dict = {}
    exec(compile(src, "<extracted>", "exec"), ns)  # our own snippet, not mined code
    assert callable(ns["reduce_chunks"]) and ns["_chunks"](9) == 3


def test_a_rebinding_statement_brings_the_definition_it_wraps():
    # `g = torch.jit.script(g)` at module level reads the `def g` it rebinds: without that def the
    # extracted module fails with a NameError when it is imported
    res = run("""
        import torch
        import torch.distributed as dist

        def _scale(x):
            return x * 2

        def _track(x):
            return x + 1

        if torch.__version__ >= "1.7":
            _scale = torch.jit.script(_scale)
            _track = torch.jit.script(_track)

        def reduce_scaled(x):
            dist.all_reduce(x)
            return _scale(x)
    """)
    (u,) = res.units
    assert u.compiles
    assert "def _scale" in u.module_source and "def _track" in u.module_source
    assert u.module_source.index("def _track") < u.module_source.index("_track = torch.jit.script")


def test_method_closure_keeps_init_and_reachable_methods():
    res = run("""
        import torch
        import torch.distributed as dist

        def _split(x, n):
            return x.chunk(n)

        class ColumnParallel(torch.nn.Module):
            world = 2

            def __init__(self, w):
                super().__init__()
                self.w = w

            def _local(self, x):
                return _split(x, self.world)[0] @ self.w

            def forward(self, x):
                y = self._local(x)
                dist.all_gather_into_tensor(y, y)
                return y

            def unrelated(self):
                return 0

        class _Reduce(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                dist.all_reduce(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g
    """)
    m, fn = res.units
    assert (m.qualname, m.kind, m.entry) == ("ColumnParallel.forward", "method", "ColumnParallel.forward")
    assert "def __init__" in m.module_source and "def _local" in m.module_source
    assert "def unrelated" not in m.module_source and "def _split" in m.module_source and m.compiles
    assert (fn.qualname, fn.kind) == ("_Reduce", "autograd_function")
    assert "def backward" in fn.module_source


def test_line_spans_and_call_lines():
    res = run("""\
        import torch.distributed as dist


        @staticmethod
        def f(x):
            y = x + 1
            dist.all_reduce(
                y)
            return y
    """)
    (u,) = res.units
    assert (u.line_start, u.line_end) == (4, 9)
    assert [c.line for c in u.calls] == [7]
    assert u.calls[0].spelling == "dist.all_reduce"


def test_module_level_calls_are_counted_not_extracted():
    res = run("""
        import torch.distributed as dist
        dist.init_process_group("gloo")
        dist.barrier()
        if dist.get_rank() == 0:
            dist.broadcast(t, 0)
    """)
    assert res.status == "ok" and res.units == [] and res.module_level_calls == 2


def test_prefilter_skips_files_without_distributed_words():
    assert run("import torch\n\ndef f(x):\n    return x.sum()\n").status == "no_match"
    assert run("import torch.distributed as dist\n\ndef f():\n    return dist.get_rank()\n").status == "no_match"
