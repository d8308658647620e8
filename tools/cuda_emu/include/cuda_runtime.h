// CPU emulator stand-in for <cuda_runtime.h> (tools/cuda_emu/README.md): the CUDA keywords,
// built-in variables, vector types and the few runtime calls csrc/cuda/ uses.
#pragma once
#include <math.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "sinkops_cuda_emu/runtime.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __shared__
#define __align__(n) alignas(n)
#define __restrict__ __restrict

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

// CUDA's integer and float min/max overloads.
#define SINKOPS_EMU_MINMAX(T)                              \
  inline T min(T a, T b) { return b < a ? b : a; } \
  inline T max(T a, T b) { return a < b ? b : a; }
SINKOPS_EMU_MINMAX(int)
SINKOPS_EMU_MINMAX(unsigned)
SINKOPS_EMU_MINMAX(long)
SINKOPS_EMU_MINMAX(unsigned long)
SINKOPS_EMU_MINMAX(long long)
SINKOPS_EMU_MINMAX(unsigned long long)
#undef SINKOPS_EMU_MINMAX

#define threadIdx (::sinkops_emu::thread_idx())
#define blockIdx (::sinkops_emu::block_idx())
#define blockDim (::sinkops_emu::block_dim())
#define gridDim (::sinkops_emu::grid_dim())
#define __syncthreads() ::sinkops_emu::barrier(0, 0)
#define __syncwarp(...) ::sinkops_emu::syncwarp()

template <typename T>
inline T __shfl_xor_sync(unsigned /*mask: every lane, as all our kernels use*/, T v, int lane_mask) {
  static_assert(sizeof(T) == 4, "32-bit shuffles only");
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits = ::sinkops_emu::shfl_xor(bits, lane_mask);
  std::memcpy(&v, &bits, 4);
  return v;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline size_t __cvta_generic_to_shared(const void* p) { return ::sinkops_emu::smem_offset(p); }

// ---- runtime API: nothing to do on the CPU, answers from tools/cuda_emu/runtime.cpp ----
typedef struct CUstream_st* cudaStream_t;
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};
enum cudaSharedCarveout { cudaSharedmemCarveoutMaxShared = 100 };  // a preference: the emulator ignores it
enum cudaDeviceAttr {
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
};
inline const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulator error"; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidValue; }
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int /*device*/) {
  *value = ::sinkops_emu::device_attribute(static_cast<int>(attr));
  return cudaSuccess;
}
template <typename F>
inline cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute attr, int bytes) {
  if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
  return bytes <= ::sinkops_emu::device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin) ? cudaSuccess
                                                                                          : cudaErrorInvalidValue;
}
