"""A custom CUDA all-reduce kernel (torch.utils.cpp_extension.load_inline) reading peers' memory.

Task l1-all_reduce-sum-lat-fp32 (2 MB of fp32 per rank). Every rank copies its input into a
symmetric-memory buffer; after a stream-ordered barrier on the symmetric signal pads, one kernel
per rank loads the same element of every rank's buffer through the peer pointers
(`buffer_ptrs`, mapped over NVLink), sums them in rank order (so every rank gets bit-identical
results) with 16-byte vector loads, and writes a fresh output tensor; a second barrier keeps the
buffers from being overwritten while peers still read them. Compiled for sm_90 on first import.
"""

import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void peer_sum_kernel(const long long* __restrict__ ptrs, int world,
                                float* __restrict__ out, long long n) {
  const long long n4 = n / 4;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int r = 0; r < world; ++r) {
      const float4 v = reinterpret_cast<const float4*>(ptrs[r])[i];
      acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
    }
    reinterpret_cast<float4*>(out)[i] = acc;
  }
  for (long long i = n4 * 4 + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float acc = 0.f;
    for (int r = 0; r < world; ++r) acc += reinterpret_cast<const float*>(ptrs[r])[i];
    out[i] = acc;
  }
}

torch::Tensor peer_sum(torch::Tensor ptrs, int64_t world, torch::Tensor out) {
  TORCH_CHECK(out.is_cuda() && out.is_contiguous() && out.scalar_type() == torch::kFloat32);
  const long long n = out.numel();
  const int threads = 256;
  long long blocks = (n / 4 + threads - 1) / threads;
  if (blocks > 1056) blocks = 1056;
  if (blocks < 1) blocks = 1;
  peer_sum_kernel<<<(int)blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const long long*>(ptrs.data_ptr<int64_t>()), (int)world,
      out.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""
CPP_SRC = "torch::Tensor peer_sum(torch::Tensor ptrs, int64_t world, torch::Tensor out);"

_ext = load_inline(
    name="mgbench_example_peer_sum",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["peer_sum"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)
_state = {}


def _setup(x):
    key = (x.numel(), x.device)
    st = _state.get(key)
    if st is None:
        group = dist.group.WORLD.group_name
        if hasattr(symm_mem, "enable_symm_mem_for_group"):  # needed by older torch, a no-op later
            symm_mem.enable_symm_mem_for_group(group)
        buf = symm_mem.empty(x.numel(), dtype=torch.float32, device=x.device)
        hdl = symm_mem.rendezvous(buf, group)
        ptrs = torch.tensor(list(hdl.buffer_ptrs), dtype=torch.int64, device=x.device)
        st = {"buf": buf, "hdl": hdl, "ptrs": ptrs, "world": hdl.world_size}
        _state[key] = st
    return st


def solution(x):
    st = _setup(x)
    st["buf"].copy_(x.reshape(-1))
    st["hdl"].barrier(channel=0)  # every rank's input is in its buffer
    out = torch.empty_like(x)
    _ext.peer_sum(st["ptrs"], st["world"], out.view(-1))
    st["hdl"].barrier(channel=0)  # every rank is done reading the buffers
    return out
