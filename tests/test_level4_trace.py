"""The level-4 tracer: exact FLOPs of matrix products, exact bytes of collectives on real gloo ranks."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.scrapers.level4.trace import TraceTarget, trace_tasks
from mgbench.scrapers.level4.tracer import TraceMode, trace_call
from mgbench.store import read_jsonl

dims = st.integers(min_value=1, max_value=9)


@settings(max_examples=6, deadline=None)
@given(m=dims, k=dims, n=dims, b=dims)
def test_matmul_flops_are_exact(m: int, k: int, n: int, b: int) -> None:
    a, w, bias = torch.randn(m, k), torch.randn(k, n), torch.randn(n)
    x, y = torch.randn(b, m, k), torch.randn(b, k, n)
    trace, _ = trace_call(lambda: (a @ w, torch.nn.functional.linear(a, w.t(), bias), torch.bmm(x, y)), ())
    assert trace.mm_flops == 2 * m * k * n * 2 + 2 * b * m * k * n
    assert trace.comm_bytes == 0 and trace.collectives == []


@settings(max_examples=6, deadline=None)
@given(m=dims, k=dims, n=dims, b=dims)
def test_matmul_flops_are_exact_under_inference_mode(m: int, k: int, n: int, b: int) -> None:
    # inference_mode hands the dispatch mode matmul, linear and einsum whole, not the mm they decompose into
    x, w, y = torch.randn(b, m, k), torch.randn(n, k), torch.randn(k, n)

    def reference_forward():
        with torch.inference_mode():
            return x @ y, torch.nn.functional.linear(x, w), torch.einsum("bmk,nk->bmn", x, w), x[0, 0] @ y

    trace, _ = trace_call(reference_forward, ())
    assert trace.mm_flops == 3 * 2 * b * m * k * n + 2 * k * n


@settings(max_examples=8, deadline=None)
@given(cin=st.integers(1, 4), cout=st.integers(1, 4), size=st.integers(3, 8), kernel=st.integers(1, 3))
def test_convolution_flops_count_every_output_dot(cin: int, cout: int, size: int, kernel: int) -> None:
    x, w = torch.randn(2, cin, size, size), torch.randn(cout, cin, kernel, kernel)
    trace, out = trace_call(lambda: torch.nn.functional.conv2d(x, w), ())
    assert trace.mm_flops == 2 * out.numel() * cin * kernel * kernel


def test_elementwise_views_and_fills_are_told_apart() -> None:
    x = torch.randn(64, 32)
    trace, _ = trace_call(lambda: (x.view(-1).t(), torch.zeros(100), x * 2.0 + 1.0, x.sum()), ())
    assert trace.mm_flops == 0
    assert trace.elementwise_flops == 3 * x.numel()  # mul, add, and the sum reading x once
    assert "aten.zeros" in trace.ops or "aten.zero_" in trace.ops  # seen, but no work


def test_item_is_counted_as_a_host_sync() -> None:
    x = torch.randn(10)
    trace, _ = trace_call(lambda: float(x.sum().item()), ())
    assert trace.host_syncs == 1


def test_harness_bookkeeping_is_counted_apart() -> None:
    def _mg_same(a: torch.Tensor, b: torch.Tensor) -> bool:  # named as the synthesized runtime's
        return torch.equal(a, b)

    x = torch.randn(1000)
    with TraceMode() as mode:
        y = x * 3.0
        _mg_same(y, x)
    assert mode.trace.elementwise_flops == x.numel()
    assert mode.trace.harness_ops == {"aten.equal": 1}


TASK = """
import torch
import torch.distributed as dist

SIZES = {{"smoke": {{"m": 2, "k": 2, "n": 2}}, "full": {{"m": {m}, "k": {k}, "n": {n}}}}}


def make_inputs(rank, world_size, *, seed, device, size="full"):
    g = torch.Generator().manual_seed(seed * 31 + rank)
    s = SIZES[size]
    return (torch.randn(s["m"], s["k"], generator=g), torch.randn(s["k"], s["n"], generator=g))


def solution(x, w):
    y = x @ w
    {comm}
    return y
"""


def _module(tmp_path: Path, name: str, m: int, k: int, n: int, comm: str) -> TraceTarget:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(TASK.format(m=m, k=k, n=n, comm=comm)))
    return TraceTarget(name, f"hash-{name}", str(path), f"c-{name}", "owner/repo")


def test_gloo_trace_counts_matmul_flops_and_all_reduce_bytes(tmp_path: Path) -> None:
    targets = [
        _module(tmp_path, "gemm_ar", 48, 40, 24, "dist.all_reduce(y)"),
        _module(
            tmp_path,
            "gemm_ag",
            16,
            8,
            12,
            "out = torch.empty(y.shape[0] * dist.get_world_size(), y.shape[1])\n"
            "    dist.all_gather_into_tensor(out, y)\n    y = out",
        ),
        _module(tmp_path, "hangs", 4, 4, 4, "if dist.get_rank() == 0:\n        __import__('time').sleep(600)"),
    ]
    store = tmp_path / "trace.jsonl"
    trace_tasks(targets[:2], store, timeout_s=40)  # generous: the test machine's CPUs are shared
    # resumable: the next call traces only the task without a record (the hang, with a short limit)
    recs = trace_tasks(targets, store, timeout_s=4)
    assert len(list(read_jsonl(store))) == 3
    ar, ag, hang = (recs[t.content_hash] for t in targets)
    assert ar["status"] == "ok" and len(ar["ranks"]) == 2
    for rank in ar["ranks"]:
        assert rank["mm_flops"] == 2 * 48 * 40 * 24
        assert rank["comm_bytes"] == 48 * 24 * 4
        assert rank["collectives"] == [["allreduce_", "float32", [[48, 24]]]]
        assert rank["inputs"] == [["float32", [48, 40]], ["float32", [40, 24]]]
        assert rank["outputs"] == [["float32", [48, 24]]]
    for rank in ag["ranks"]:  # all_gather: the gathered output, as nccl-tests sizes it
        assert rank["comm_bytes"] == 2 * 16 * 12 * 4
        assert rank["mm_flops"] == 2 * 16 * 8 * 12
    assert hang["status"] == "timeout"
    # and once every task has a record, a call traces nothing and returns the stored records
    n_lines = len(list(read_jsonl(store)))
    again = trace_tasks(targets, store, timeout_s=20, pool_factory=lambda: pytest.fail("nothing is left to trace"))
    assert again.keys() == recs.keys() and len(list(read_jsonl(store))) == n_lines
