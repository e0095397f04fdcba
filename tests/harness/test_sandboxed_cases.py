"""End-to-end: hand-written candidate cases are synthesized and accepted on sandboxed gloo ranks."""

from __future__ import annotations

import pytest

from mgbench.scrapers.harness.inputs.search import synthesize
from tests.harness.helpers import CASES, FAST_12, FAST_14, candidate

pytestmark = pytest.mark.sandboxed  # runs candidates or tasks through child rank processes


RULE_CASES = {
    # P2POp checks `op in (isend, irecv)`: the tracer must wrap dist.isend and c10d.isend as one object
    "p2p_ring": (
        """import torch
import torch.distributed as dist


def ring_shift(x, group):
    rank, ws = dist.get_rank(group), dist.get_world_size(group)
    out = torch.empty_like(x)
    ops = [dist.P2POp(dist.isend, x, (rank + 1) % ws, group), dist.P2POp(dist.irecv, out, (rank - 1) % ws, group)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    return out * 2 + x
""",
        ["x", "group"],
    ),
    # a repository generic used as a base class: `Awaitable[int]` on a placeholder when the class is defined
    "generic_base": (
        """import torch
import torch.distributed as dist
from repo.types import Awaitable


class Req(Awaitable[int]):
    pass


def reduce_sum(x):
    y = x.clone()
    dist.all_reduce(y)
    return y + 1
""",
        ["x"],
    ),
    # `hook` is guessed a tensor, then gelu (called without an input), then a no-op callable
    "noop_hook": (
        """import torch
import torch.distributed as dist


def reduce_with_hook(grad, hook):
    hook()
    dist.all_reduce(grad)
    return grad * 3
""",
        ["grad", "hook"],
    ),
    # `pending` is filled with `.append`: an empty list
    "append_list": (
        """import torch
import torch.distributed as dist


def gather_pending(x, pending):
    pending.append(x * 2)
    dist.all_reduce(pending[0])
    return pending[0]
""",
        ["x", "pending"],
    ),
    # module globals the extracted code lacks (set by an init function or under `__main__`)
    "module_globals": (
        """import torch
import torch.distributed as dist


def reduce_head(x):
    y = x[:HIDDEN_SIZE].clone()
    dist.all_reduce(y, group=_EP_GROUP)
    return y * WORLD_SIZE
""",
        ["x"],
    ),
}


@pytest.mark.parametrize("name", sorted(RULE_CASES))
def test_rule_cases_are_accepted(name, monkeypatch):
    monkeypatch.setitem(CASES, name, RULE_CASES[name])
    cand, text = candidate(name)
    res = synthesize(cand, text, FAST_12)
    assert res.accepted, (res.reason, res.last_error)
    kinds = {a["name"]: a for a in res.spec["args"]}
    if name == "noop_hook":
        assert kinds["hook"] == {"name": "hook", "kind": "fn", "value": "noop"}
    if name == "module_globals":
        assert {g["name"]: g["kind"] for g in res.spec["globals"]} == {
            "HIDDEN_SIZE": "int",
            "_EP_GROUP": "group",
            "WORLD_SIZE": "int",
        }
    if name == "append_list":
        assert kinds["pending"]["kind"] == "tensors" and kinds["pending"]["count"] == "0"


SHAPED = (
    """import pytest
import torch
import torch.distributed as dist


@pytest.mark.parametrize("shape", [(2, 4), (4, 2)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_reduce_shaped(x, shape, dtype):
    y = x.to(dtype).reshape(shape[0], -1)
    dist.all_reduce(y)
    return y
""",
    ["x", "shape", "dtype"],
)


def test_parametrized_test_starts_from_its_first_case(monkeypatch):
    """A parametrized test gets the values it was written for (first case of each decorator) instead of
    name-based guesses; literals only, tuples as lists, `torch.<dtype>` as a dtype."""
    monkeypatch.setitem(CASES, "shaped", SHAPED)
    cand, text = candidate("shaped")
    cand["decorators"] = [
        'pytest.mark.parametrize("shape", [(2, 4), (4, 2)])',
        'pytest.mark.parametrize("dtype", [torch.float64, torch.float32])',
    ]
    res = synthesize(cand, text, FAST_14)
    assert res.accepted, (res.reason, res.last_error)
    assert res.spec["args"][1:] == [
        {"name": "shape", "kind": "literal", "value": [2, 4]},
        {"name": "dtype", "kind": "dtype", "value": "float64"},
    ]
    assert res.attempts <= 2  # accepted at world size 2 on the first try (then world size 4)


@pytest.mark.parametrize("name", ["grad_allreduce", "gather_out", "a2a_splits", "divisible", "parallel_state"])
def test_synthesizes_an_accepted_harness(name):
    cand, text = candidate(name)
    res = synthesize(cand, text, FAST_12)
    assert res.accepted, (res.reason, res.last_error)
    assert 2 in res.world_sizes
    assert all(fp["nonzero"] > 0 for fp in res.fingerprints["ws2"])
    kinds = {a["name"]: a["kind"] for a in res.spec["args"]}
    if "group" in kinds:
        assert kinds["group"] == "group"
    if name == "a2a_splits":
        assert kinds["input_splits"] == "splits" and 4 in res.world_sizes
    if name == "parallel_state":
        assert "megatron.core.parallel_state" in res.stubbed
