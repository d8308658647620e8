// Launch of one (dtype, padded head dim, sink policy) instantiation of the sm_90a window kernel.
// window_attention_sm90.cu sees only these declarations; each window_attention_sm90_hdim<D>.cu
// includes the kernel and instantiates its head dim, so the CuTe-heavy instantiations compile in
// parallel. Adding a head dim = one entry in Sm90WindowHeadDims + its instantiation file.
#pragma once
#include <cuda_runtime.h>

#include "../static_switch.cuh"
#include "../window_attention_launch.cuh"
#include "sinkops/window_attention_params.h"

namespace sinkops::cuda::sm90 {

using Sm90WindowHeadDims = HeadDims<64, 80, 96, 128>;

template <int kHeadDim>
int window_attention_smem_bytes();
template <int kHeadDim>
int window_attention_cta_rows();  // 64 per warpgroup

template <typename T, int kHeadDim, typename Sink>
void launch_window_attention(const WindowAttentionParams& p, const window_attention::LaunchShape& shape, dim3 grid,
                             cudaStream_t stream);

// The body of window_attention_sm90_hdim<D>.cu: every dtype x sink policy of head dim D.
#define SINKOPS_INSTANTIATE_WINDOW_ATTENTION_SM90(D)                                                   \
  template int window_attention_smem_bytes<D>();                                                     \
  template int window_attention_cta_rows<D>();                                                       \
  template void launch_window_attention<__nv_bfloat16, D, sink::Key0Sink>(                           \
      const WindowAttentionParams&, const window_attention::LaunchShape&, dim3, cudaStream_t);       \
  template void launch_window_attention<__nv_bfloat16, D, sink::NullSink>(                           \
      const WindowAttentionParams&, const window_attention::LaunchShape&, dim3, cudaStream_t);       \
  template void launch_window_attention<__half, D, sink::Key0Sink>(                                  \
      const WindowAttentionParams&, const window_attention::LaunchShape&, dim3, cudaStream_t);       \
  template void launch_window_attention<__half, D, sink::NullSink>(                                  \
      const WindowAttentionParams&, const window_attention::LaunchShape&, dim3, cudaStream_t);

}  // namespace sinkops::cuda::sm90
