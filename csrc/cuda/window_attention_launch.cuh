// Launch of one (dtype, padded head dim) instantiation of the window attention kernel.
// Instantiated once per head dim in window_attention_hdim<D>.cu (parallel builds; only the
// head dims the dispatcher in window_attention.cu can pick are compiled).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "window_attention_kernel.cuh"

namespace sinkops::cuda::window_attention {

template <typename T, int kHeadDim>
void launch(const WindowAttentionParams& p, const LaunchShape& shape, dim3 grid, cudaStream_t stream) {
  using Tr = Traits<kHeadDim>;
  auto kernel = window_attention_fwd_kernel<T, kHeadDim>;
  if (Tr::kSmemBytes > 48 * 1024) {
    // Per-function attribute; cheap, not a stream operation (fine under graph capture).
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
    if (e != cudaSuccess) throw Error(std::string("window_attention: cudaFuncSetAttribute: ") + cudaGetErrorString(e));
  }
  SINKOPS_LAUNCH(kernel, grid, Tr::kThreads, Tr::kSmemBytes, stream)(p, shape);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw Error(std::string("window_attention: launch failed: ") + cudaGetErrorString(e));
}

// Head dims with a compiled kernel; window_attention.cu rounds max(d, d_v) up to one of these.
#define SINKOPS_WINDOW_ATTENTION_HEAD_DIMS(X) X(64) X(80) X(96) X(128) X(256)

#define SINKOPS_DECLARE_WINDOW_ATTENTION(D)                                                                  \
  extern template void launch<__nv_bfloat16, D>(const WindowAttentionParams&, const LaunchShape&, dim3, \
                                                cudaStream_t);                                           \
  extern template void launch<__half, D>(const WindowAttentionParams&, const LaunchShape&, dim3, cudaStream_t);
SINKOPS_WINDOW_ATTENTION_HEAD_DIMS(SINKOPS_DECLARE_WINDOW_ATTENTION)
#undef SINKOPS_DECLARE_WINDOW_ATTENTION

#define SINKOPS_INSTANTIATE_WINDOW_ATTENTION(D)                                                              \
  template void launch<__nv_bfloat16, D>(const WindowAttentionParams&, const LaunchShape&, dim3, cudaStream_t); \
  template void launch<__half, D>(const WindowAttentionParams&, const LaunchShape&, dim3, cudaStream_t);

}  // namespace sinkops::cuda::window_attention
