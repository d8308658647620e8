// Launch of one (dtype, padded head dim, sink policy) instantiation of the sm_90a window kernel.
// window_attention_sm90.cu sees only these declarations; each window_attention_sm90_hdim<D>.cu
// includes the kernel and instantiates its head dim, so the CuTe-heavy instantiations compile in
// parallel. Adding a head dim = one entry in Sm90WindowHeadDims + its instantiation file.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../static_switch.cuh"
#include "../window_attention_launch.cuh"
#include "sinkops/window_attention_backward_params.h"
#include "sinkops/window_attention_params.h"

namespace sinkops::cuda::sm90 {

using Sm90WindowHeadDims = HeadDims<64, 80, 96, 128>;

// What the host needs of one kernel variant before launching it.
struct Sm90WindowTiling {
  int smem_bytes;   // dynamic shared memory per CTA
  int cta_rows;     // rows of one step: 64 per warpgroup
  int ctas_per_sm;  // resident CTAs per SM the kernel is built for
  int stages;       // K/V tiles in the ring
};
// kStream: one CTA per SM over a run of steps (every head dim); else one step per CTA at 2 CTAs
// per SM, compiled where it differs (kHasOneStepKernel: d <= 80).
template <int kHeadDim, bool kStream>
Sm90WindowTiling window_attention_tiling();
template <int kHeadDim>
constexpr bool kHasOneStepKernel = kHeadDim <= 80;

constexpr int kTileKeys = 64;  // keys per K/V tile
// Whether consecutive steps of `positions` positions (one CTA's blocks of rows) can keep the K/V
// tiles they share in a ring of `stages` tiles: both window sides bounded, and one step's keys (at
// most positions + left + right, anywhere on the 64-key grid) span at most `stages` tiles.
__host__ __device__ inline bool steps_share_tiles(int left, int right, int positions, int stages) {
  return left >= 0 && right >= 0 && (int64_t(positions) + left + right + kTileKeys - 2) / kTileKeys + 1 <= stages;
}

template <typename T, int kHeadDim, typename Sink, bool kStream>
void launch_window_attention(const WindowAttentionParams& p, const window_attention::LaunchShape& shape, dim3 grid,
                             cudaStream_t stream);

// The body of window_attention_sm90_hdim<D>.cu: every dtype x sink policy of one variant of head
// dim D (the streaming one for every D, the one-step one where kHasOneStepKernel<D>).
#define SINKOPS_INSTANTIATE_WINDOW_ATTENTION_SM90(D, STREAM)                                            \
  template Sm90WindowTiling window_attention_tiling<D, STREAM>();                                       \
  template void launch_window_attention<__nv_bfloat16, D, sink::Key0Sink, STREAM>(                      \
      const WindowAttentionParams&, const window_attention::LaunchShape&, dim3, cudaStream_t);          \
  template void launch_window_attention<__nv_bfloat16, D, sink::NullSink, STREAM>(                      \
      const WindowAttentionParams&, const window_attention::LaunchShape&, dim3, cudaStream_t);          \
  template void launch_window_attention<__half, D, sink::Key0Sink, STREAM>(                             \
      const WindowAttentionParams&, const window_attention::LaunchShape&, dim3, cudaStream_t);          \
  template void launch_window_attention<__half, D, sink::NullSink, STREAM>(                             \
      const WindowAttentionParams&, const window_attention::LaunchShape&, dim3, cudaStream_t);

// The wide-window kernel (window_attention_sm90_wide.cuh): one block of 128 rows per CTA, 128-key
// tiles, the MMAs of consecutive tiles overlapped with the softmax. For windows whose consecutive
// blocks cannot share key tiles (full, causal, wide).
template <int kHeadDim>
Sm90WindowTiling window_attention_wide_tiling();
template <typename T, int kHeadDim, typename Sink>
void launch_window_attention_wide(const WindowAttentionParams& p, const window_attention::LaunchShape& shape,
                                  dim3 grid, cudaStream_t stream);
#define SINKOPS_INSTANTIATE_WINDOW_ATTENTION_SM90_WIDE(D)                                                 \
  template Sm90WindowTiling window_attention_wide_tiling<D>();                                            \
  template void launch_window_attention_wide<__nv_bfloat16, D, sink::Key0Sink>(                           \
      const WindowAttentionParams&, const window_attention::LaunchShape&, dim3, cudaStream_t);            \
  template void launch_window_attention_wide<__nv_bfloat16, D, sink::NullSink>(                           \
      const WindowAttentionParams&, const window_attention::LaunchShape&, dim3, cudaStream_t);            \
  template void launch_window_attention_wide<__half, D, sink::Key0Sink>(                                  \
      const WindowAttentionParams&, const window_attention::LaunchShape&, dim3, cudaStream_t);            \
  template void launch_window_attention_wide<__half, D, sink::NullSink>(                                  \
      const WindowAttentionParams&, const window_attention::LaunchShape&, dim3, cudaStream_t);

// ---- the backward (window_attention_bwd_sm90.cuh), over the same head dims ----
// What the host computes once per launch of either backward kernel.
struct WindowBwdShape {
  int group;         // h_q / h_k, a power of two
  int hc;            // heads of a block of rows: min(group, 64)
  int pw;            // positions of a block: 64 / hc
  int head_chunks;   // group / hc
  int blocks;        // grid.x: dq: runs of `steps` steps of max_seqlen_q; dk/dv: 64-key tiles of max_seqlen_k
  float scale_log2;  // scale * log2(e)
  int steps;         // dq: consecutive steps (warpgroups x pw positions) per CTA; dk/dv: 1
  int stream;        // dq: 1 = the streaming kernel, 0 = one step of one warpgroup per CTA (kHasOneStepDq)
};
template <int kHeadDim>
int window_attention_bwd_smem_bytes();
// The dq kernel's step (cta_rows = 64 x warpgroups) and ring, for its steps per CTA: the streaming
// kernel (every head dim) and the one-step one (kHasOneStepDq).
template <int kHeadDim, bool kStream>
Sm90WindowTiling window_attention_bwd_dq_tiling();
template <int kHeadDim>
constexpr bool kHasOneStepDq = kHeadDim <= 64;
// The dq kernel, then the dk/dv kernel (which reads the row terms the first one writes), on `stream`.
template <typename T, int kHeadDim, typename Sink>
void launch_window_attention_bwd(const WindowAttentionBackwardParams& p, const WindowBwdShape& dq_shape,
                                 const WindowBwdShape& dkdv_shape, int batch_z, cudaStream_t stream);

// The body of window_attention_bwd_sm90_hdim<D>.cu: every dtype x sink policy of head dim D.
#define SINKOPS_INSTANTIATE_WINDOW_ATTENTION_BWD_SM90(D)                                                  \
  template int window_attention_bwd_smem_bytes<D>();                                                      \
  template Sm90WindowTiling window_attention_bwd_dq_tiling<D, true>();                                    \
  template Sm90WindowTiling window_attention_bwd_dq_tiling<D, false>();                                   \
  template void launch_window_attention_bwd<__nv_bfloat16, D, sink::Key0Sink>(                            \
      const WindowAttentionBackwardParams&, const WindowBwdShape&, const WindowBwdShape&, int, cudaStream_t); \
  template void launch_window_attention_bwd<__nv_bfloat16, D, sink::NullSink>(                            \
      const WindowAttentionBackwardParams&, const WindowBwdShape&, const WindowBwdShape&, int, cudaStream_t); \
  template void launch_window_attention_bwd<__half, D, sink::Key0Sink>(                                   \
      const WindowAttentionBackwardParams&, const WindowBwdShape&, const WindowBwdShape&, int, cudaStream_t); \
  template void launch_window_attention_bwd<__half, D, sink::NullSink>(                                   \
      const WindowAttentionBackwardParams&, const WindowBwdShape&, const WindowBwdShape&, int, cudaStream_t);

}  // namespace sinkops::cuda::sm90
