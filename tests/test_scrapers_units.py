"""Scraper building blocks: MinHash bounds, AST hashing, dedup, licenses, kernel index, sources, pool."""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.scrapers.classify import load_ids
from mgbench.scrapers.dedup import Member, ast_hash, cluster
from mgbench.scrapers.kernels import index_cuda, index_triton
from mgbench.scrapers.licenses import detect_text, normalize, permitted
from mgbench.scrapers.minhash import candidate_pairs, jaccard, signature, similarity, source_signature
from mgbench.scrapers.pool import TaskFailed, TimeoutPool
from mgbench.scrapers.sources import load_sources

words = st.sets(st.text("abcdefgh", min_size=1, max_size=4), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(a=words, b=words)
def test_minhash_estimate_is_within_bounds_of_true_jaccard(a, b):
    est = similarity(signature(a), signature(b))
    assert abs(est - jaccard(a, b)) <= 0.25  # sd <= 0.045 at 128 permutations
    assert similarity(signature(a), signature(set(a))) == 1.0


@settings(max_examples=30, deadline=None)
@given(
    shared=st.sets(st.integers(0, 10**6), min_size=40, max_size=80),
    extra=st.sets(st.integers(10**6 + 1, 2 * 10**6), max_size=3),
)
def test_lsh_finds_highly_similar_sets(shared, extra):
    a = {str(x) for x in shared}
    b = a | {str(x) for x in extra}
    c = {f"other{x}" for x in shared}
    assert (0, 1) in candidate_pairs([signature(a), signature(b), signature(c)])
    assert similarity(signature(a), signature(c)) < 0.2


def test_ast_hash_ignores_comments_docstrings_and_layout():
    a = 'def f(x):\n    """Doc."""\n    # comment\n    return dist.all_reduce(x)\n'
    b = "def f(x):\n    return dist.all_reduce( x )  # other\n"
    c = "def f(x):\n    return dist.broadcast(x)\n"
    assert ast_hash(a) == ast_hash(b) != ast_hash(c)


def test_cluster_picks_permitted_then_priority_and_lists_origins():
    src = "def ring(k, v, peer):\n" + "".join(f"    k{i} = dist.isend(k, peer + {i})\n" for i in range(12))
    renamed = src.replace("ring(k, v", "ring(key, val").replace("(k,", "(key,") + "    return key\n"
    other = "def g(x):\n    return torch.matmul(x, x) + dist.all_reduce(x)\n"
    members = [
        Member("gpl", ast_hash(src), source_signature(src), (True, 0)),
        Member("mit", ast_hash(src), source_signature(src), (False, 5)),
        Member("fork", ast_hash(renamed), source_signature(renamed), (False, 9)),
        Member("other", ast_hash(other), source_signature(other), (False, 0)),
    ]
    out = cluster(members)
    assert out["gpl"] == ("mit", 1.0) and out["mit"] == ("mit", 1.0)
    assert out["fork"][0] == "mit" and 0.8 <= out["fork"][1] < 1.0
    assert out["other"] == ("other", 1.0)


def test_licenses():
    assert detect_text("Apache License\n  Version 2.0, January 2004") == "Apache-2.0"
    assert detect_text("Copyright x\nPermission is hereby granted, free of charge, to any person") == "MIT"
    bsd3 = "Redistribution and use in source and binary forms ... 3. Neither the name of the copyright holder"
    assert detect_text(bsd3) == "BSD-3-Clause"
    assert detect_text("Redistribution and use in source and binary forms, with or without") == "BSD-2-Clause"
    assert detect_text("GNU GENERAL PUBLIC LICENSE\n Version 3, 29 June 2007") == "GPL-3.0"
    assert normalize("apache-2.0") == "Apache-2.0" and normalize("NOASSERTION") is None
    assert permitted("MIT") and permitted("bsd-3-clause") and not permitted("GPL-3.0")
    assert not permitted(None) and not permitted("CC-BY-NC")


CUDA = r"""
template <typename T, int ngpus>
__global__ void __launch_bounds__(512, 1) cross_device_reduce_1stage(RankData* _dp, T* result, int size) {
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(flag) : "l"(peer_flag));
  for (int i = 0; i < ngpus; i++) tmp += ptrs[i][idx];
}
__global__ void multimem_all_gather_kernel(float* mc_ptr) {
  asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1,%2,%3,%4};" :: "l"(mc_ptr));
}
__global__ void gemm_rs_kernel(const half* a, half* out) {
  cudaMemcpyAsync(out, a, 16, cudaMemcpyDeviceToDevice, stream);
}
__global__ void layernorm_fwd(const float* x) { float y = x[0]; }
void host_only(int x);
"""
TRITON = """
import triton
import triton.language as tl

@triton.jit
def all_gather_push_kernel(ptr, peer_ptrs, rank, N: tl.constexpr):
    remote = tl.load(peer_ptrs + rank)
    libshmem_device.putmem_nbi_block(remote, ptr, N)

@triton.jit
def local_add(x, y):
    return x + y
"""


def test_kernel_index_cuda_and_triton():
    tax = load_ids()
    ks = {k["kernel"]: k for k in index_cuda(CUDA.encode(), "csrc/custom_all_reduce.cuh", tax)}
    assert set(ks) == {"cross_device_reduce_1stage", "multimem_all_gather_kernel", "gemm_rs_kernel"}
    ar = ks["cross_device_reduce_1stage"]
    assert ar["patterns"] == ["all_reduce"] and "peer_load_store" in ar["mechanisms"] and "all_reduce" in ar["families"]
    assert ks["multimem_all_gather_kernel"]["mechanisms"] == ["multimem", "peer_load_store"]
    rs = ks["gemm_rs_kernel"]
    assert (rs["patterns"], rs["fused"], rs["mechanisms"]) == (["reduce_scatter"], "gemm", ["copy_engine"])
    assert "gemm_rs" in rs["families"] and ar["line"] == 3
    (t,) = index_triton(TRITON.encode(), "kernels/ag.py", tax)
    assert (t["kernel"], t["language"], t["patterns"]) == ("all_gather_push_kernel", "triton", ["all_gather"])
    assert "nvshmem" in t["mechanisms"] and t["line"] == 6


def test_sources_file_loads_and_rejects_bad_pins(tmp_path):
    s = load_sources()
    assert len(s.repositories) >= 10 and all(r.commit and len(r.commit) == 40 for r in s.repositories)
    assert s.facades["deepspeed.comm"] == "torch.distributed"
    assert len(s.search.expanded()) == len(s.search.queries) * len(s.search.shards)
    bad = tmp_path / "s.yaml"
    bad.write_text("repositories:\n  - repo: a/b\n    commit: main\n")
    with pytest.raises(ValueError, match="40 lowercase hex"):
        load_sources(bad)


def _work(x: str):
    if x == "hang":
        time.sleep(60)
    if x == "crash":
        os._exit(3)
    if x == "raise":
        raise RuntimeError("boom")
    return x.upper()


def test_pool_kills_a_hung_or_crashed_worker_and_goes_on():
    pool = TimeoutPool(_work, processes=2, timeout=1.0)
    got = dict(pool.imap_unordered(["a", "hang", "b", "crash", "raise", "c"]))
    assert (got["a"], got["b"], got["c"]) == ("A", "B", "C")
    assert isinstance(got["hang"], TaskFailed) and got["hang"].reason == "timeout"
    assert got["crash"].reason == "worker_crash" and got["raise"].reason == "error"
    assert pool.restarts == 2
