"""One-shot all-reduce for small messages over torch symmetric memory, with a push kernel.

Task l1-all_reduce-sum-lat-bf16 (1 MB of bf16 per rank). NCCL pays several protocol steps for a
message this small, and torch's own one-shot op (see the @torch_one_shot sample) pulls peers' data
with only 24 blocks. Here the symmetric buffer comes from torch.distributed._symmetric_memory
(allocation, rendezvous, peer pointers; no NVLink multicast), and one kernel (load_inline) does
the whole all-reduce: each block stores its chunk of the input straight into every peer's buffer
over NVLink (stores do not wait for a round trip), raises a per-block flag on each peer with
release semantics, waits (acquire) for the same block's flags from every peer, and sums the chunk
from local memory in rank order, so every rank gets bit-identical results. Two buffer halves
alternate between calls (epoch parity), which makes reuse safe without a trailing barrier.
"""

import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
THREADS, MAX_BLOCKS = 512, 128

KERNEL = r"""
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

__device__ __forceinline__ void st_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

template <typename T> struct Pack;
template <> struct Pack<float> {
  static constexpr int N = 4;
  __device__ static float get(const uint4& v, int i) { return reinterpret_cast<const float*>(&v)[i]; }
  __device__ static void put(uint4& v, int i, float f) { reinterpret_cast<float*>(&v)[i] = f; }
};
template <> struct Pack<__nv_bfloat16> {
  static constexpr int N = 8;
  __device__ static float get(const uint4& v, int i) {
    return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(&v)[i]);
  }
  __device__ static void put(uint4& v, int i, float f) {
    reinterpret_cast<__nv_bfloat16*>(&v)[i] = __float2bfloat16(f);
  }
};
template <> struct Pack<__half> {
  static constexpr int N = 8;
  __device__ static float get(const uint4& v, int i) { return __half2float(reinterpret_cast<const __half*>(&v)[i]); }
  __device__ static void put(uint4& v, int i, float f) { reinterpret_cast<__half*>(&v)[i] = __float2half(f); }
};

// ptrs[p]: base of rank p's symmetric buffer, laid out as [2 halves][world][nvec] uint4, then
// the flags [MAX_BLOCKS][world] uint32 at flags_offset bytes.
template <typename T>
__global__ void push_all_reduce(const unsigned long long* __restrict__ ptrs, const uint4* __restrict__ in,
                                uint4* __restrict__ out, long long nvec, int rank, int world,
                                uint32_t epoch, long long flags_offset) {
  const long long per_block = (nvec + gridDim.x - 1) / gridDim.x;
  const long long lo = (long long)blockIdx.x * per_block;
  const long long hi = lo + per_block < nvec ? lo + per_block : nvec;
  const long long half = (long long)(epoch & 1u) * world;
  for (int s = 1; s < world; ++s) {                       // 1. push my chunk to every peer
    const int p = (rank + s) % world;
    uint4* dst = reinterpret_cast<uint4*>(ptrs[p]) + (half + rank) * nvec;
    for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) dst[i] = in[i];
  }
  __syncthreads();
  if (threadIdx.x < world && (int)threadIdx.x != rank) {   // 2. raise my flag on each peer ...
    uint32_t* f = reinterpret_cast<uint32_t*>(ptrs[threadIdx.x] + flags_offset);
    __threadfence_system();
    st_release_sys(f + blockIdx.x * world + rank, epoch);
    const uint32_t* mine = reinterpret_cast<const uint32_t*>(ptrs[rank] + flags_offset);
    while (ld_acquire_sys(mine + blockIdx.x * world + threadIdx.x) < epoch) {}   // 3. ... wait for theirs
  }
  __syncthreads();
  const uint4* slots = reinterpret_cast<const uint4*>(ptrs[rank]) + half * nvec;
  for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) {   // 4. sum in rank order
    float acc[Pack<T>::N];
#pragma unroll
    for (int k = 0; k < Pack<T>::N; ++k) acc[k] = 0.f;
    for (int p = 0; p < world; ++p) {
      const uint4 v = p == rank ? in[i] : __ldcg(slots + (long long)p * nvec + i);
#pragma unroll
      for (int k = 0; k < Pack<T>::N; ++k) acc[k] += Pack<T>::get(v, k);
    }
    uint4 r;
#pragma unroll
    for (int k = 0; k < Pack<T>::N; ++k) Pack<T>::put(r, k, acc[k]);
    out[i] = r;
  }
}
"""

WRAPPER = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

torch::Tensor push_all_reduce_out(torch::Tensor ptrs, torch::Tensor x, torch::Tensor out, int64_t rank,
                                  int64_t world, int64_t epoch, int64_t flags_offset, int64_t blocks) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && out.is_contiguous() && x.numel() == out.numel());
  const int64_t nbytes = x.numel() * x.element_size();
  TORCH_CHECK(nbytes % 16 == 0, "push_all_reduce: the message must be a multiple of 16 bytes");
  auto stream = at::cuda::getCurrentCUDAStream();
  auto p = reinterpret_cast<const unsigned long long*>(ptrs.data_ptr<int64_t>());
  auto in = reinterpret_cast<const uint4*>(x.data_ptr());
  auto o = reinterpret_cast<uint4*>(out.data_ptr());
  const long long nvec = nbytes / 16;
  const uint32_t e = (uint32_t)epoch;
  if (x.scalar_type() == torch::kFloat32) {
    push_all_reduce<float><<<blocks, 512, 0, stream>>>(p, in, o, nvec, rank, world, e, flags_offset);
  } else if (x.scalar_type() == torch::kBFloat16) {
    push_all_reduce<__nv_bfloat16><<<blocks, 512, 0, stream>>>(p, in, o, nvec, rank, world, e, flags_offset);
  } else if (x.scalar_type() == torch::kFloat16) {
    push_all_reduce<__half><<<blocks, 512, 0, stream>>>(p, in, o, nvec, rank, world, e, flags_offset);
  } else {
    TORCH_CHECK(false, "push_all_reduce: unsupported dtype");
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

_ext = load_inline(
    name="mgbench_example_push_all_reduce",
    cuda_sources=KERNEL + WRAPPER,
    cpp_sources="torch::Tensor push_all_reduce_out(torch::Tensor ptrs, torch::Tensor x, "
    "torch::Tensor out, int64_t rank, int64_t world, int64_t epoch, "
    "int64_t flags_offset, int64_t blocks);",
    functions=["push_all_reduce_out"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)
_state = {}


def _setup(x):
    key = (x.numel(), x.dtype, x.device)
    st = _state.get(key)
    if st is None:
        group = dist.group.WORLD.group_name
        if hasattr(symm_mem, "enable_symm_mem_for_group"):  # needed by older torch, a no-op later
            symm_mem.enable_symm_mem_for_group(group)
        world, rank = dist.get_world_size(), dist.get_rank()
        nbytes = x.numel() * x.element_size()
        flags_offset = 2 * world * nbytes  # a multiple of 16
        buf = symm_mem.empty(flags_offset + MAX_BLOCKS * world * 4, dtype=torch.uint8, device=x.device)
        hdl = symm_mem.rendezvous(buf, group)
        buf[flags_offset:].zero_()
        torch.cuda.synchronize(x.device)
        dist.barrier()  # every rank's flags are zero
        st = {
            "buf": buf,
            "hdl": hdl,
            "rank": rank,
            "world": world,
            "epoch": 0,
            "flags": flags_offset,
            "ptrs": torch.tensor(list(hdl.buffer_ptrs), dtype=torch.int64, device=x.device),
            "blocks": max(1, min(MAX_BLOCKS, -(-nbytes // (16 * THREADS)))),
        }
        _state[key] = st
    return st


def solution(x):
    st = _setup(x)
    st["epoch"] += 1
    out = torch.empty_like(x)
    _ext.push_all_reduce_out(
        st["ptrs"], x.contiguous(), out, st["rank"], st["world"], st["epoch"], st["flags"], st["blocks"]
    )
    return out
