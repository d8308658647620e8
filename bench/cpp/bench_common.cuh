// Shared pieces of the C++ microbenchmarks: error checks and deterministic device-side random fill.
// Each benchmark times its kernel through the torch-free C++ API (cuda_api.h) with CUDA events.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define CHECK_CUDA(x)                                                                   \
  do {                                                                                  \
    cudaError_t err_ = (x);                                                             \
    if (err_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

// splitmix64-style finalizer: a cheap counter-based generator (no state, any launch shape).
__device__ __forceinline__ uint32_t hash_u32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// Uniform in [-amplitude, amplitude): O(1) logits like a real checkpoint's, never zeros.
__global__ void fill_bf16(__nv_bfloat16* p, int64_t n, uint64_t seed, float amplitude) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    p[i] = __float2bfloat16((hash_u32(i * 2654435761ULL + seed) * (2.f / 4294967296.f) - 1.f) *
                            amplitude);
}
