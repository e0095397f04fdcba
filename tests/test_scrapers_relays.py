"""Entry functions that communicate only through same-module helpers (scrapers/relays.py) are units,
with the helpers' call sites; functions other code of the module calls, and functions that reach no
communicating helper, are not."""

from __future__ import annotations

import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.scrapers.extract import ExtractConfig, extract_source

CFG = ExtractConfig()

MODULE = '''
import torch
import torch.distributed as dist


def _a2a(x, group=None):
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x, group=group)
    return out


def _reshape_then_a2a(x):
    return _a2a(x.reshape(-1)).reshape(x.shape)


class _Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(out, x)
        return torch.cat(out)


class Ring:
    def __init__(self):
        self.rank = dist.get_rank()

    def shift(self, x):
        return dist.isend(x, (self.rank + 1) % dist.get_world_size())


def solution(x, scatter_dim: int):
    """The entry: no collective of its own."""
    y = _reshape_then_a2a(x * 2)
    return _Gather.apply(y) + scatter_dim


def ring_entry(x):
    return Ring().shift(x)


def local_only(x):
    return torch.relu(x)


def calls_local(x):
    return local_only(x) + 1


def test_ring(x):
    assert ring_entry(x) is not None
'''


def units(src: str) -> dict[str, object]:
    res = extract_source(textwrap.dedent(src).encode(), "reference/1_demo.py", CFG)
    return {u.qualname: u for u in res.units}


def test_entry_reaching_helpers_is_a_unit_with_their_call_sites():
    got = units(MODULE)
    sol = got["solution"]
    assert [(c.op, c.through) for c in sol.calls] == [("all_gather", "_Gather"), ("all_to_all_single", "_a2a")]
    assert sol.kind == "function" and sol.entry == "solution" and [p.name for p in sol.params] == ["x", "scatter_dim"]
    assert {"_a2a", "_reshape_then_a2a", "_Gather"} <= set(sol.helpers)
    assert "def _a2a(" in sol.module_source and sol.module_source.rstrip().endswith(
        "return _Gather.apply(y) + scatter_dim"
    )
    assert sol.compiles and sol.line_start == MODULE.splitlines().index("def solution(x, scatter_dim: int):") + 1
    ring = got["ring_entry"]
    assert [(c.op, c.through) for c in ring.calls] == [("isend", "Ring")]


def test_helpers_keep_their_own_units_and_non_entries_are_not_units():
    got = units(MODULE)
    assert all(c.through is None for q in ("_a2a", "_Gather", "Ring.shift") for c in got[q].calls)
    # called by another function of the module (not an entry), or reaching no collective
    assert "_reshape_then_a2a" not in got and "local_only" not in got and "calls_local" not in got
    assert "test_ring" not in got  # a pytest function takes fixtures: no entry


@settings(max_examples=25, deadline=None)
@given(depth=st.integers(1, 4), called=st.booleans())
def test_a_chain_of_plain_functions_relays_the_collective(depth, called):
    """entry -> f1 -> ... -> f_depth -> dist.all_reduce: the entry is a unit (unless another function calls it)."""
    chain = [f"def f{i}(x):\n    return f{i + 1}(x) + 1\n" for i in range(1, depth)]
    chain.append(f"def f{depth}(x):\n    dist.all_reduce(x)\n    return x\n")
    src = "import torch.distributed as dist\n\n\n" + "\n\n".join(chain) + "\n\ndef entry(x):\n    return f1(x)\n"
    if called:
        src += "\n\ndef user(x):\n    return entry(x)\n"
    got = units(src)
    top = "user" if called else "entry"
    assert top in got and [(c.op, c.through) for c in got[top].calls] == [("all_reduce", f"f{depth}")]
    assert ("entry" in got) != called
    assert {q for q in got if q.startswith("f")} == {f"f{depth}"}
