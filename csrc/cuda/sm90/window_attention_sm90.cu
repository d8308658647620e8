// Launcher of the sm_90a window attention kernel (window_attention_sm90.cuh): the GQA folding,
// the grid and the instantiation. The portable entry point (csrc/cuda/window_attention.cu) has
// validated the params and decides when this runs (window_attention_sm90_takes).
#include "../kernel_launch.cuh"
#include "../static_switch.cuh"
#include "sm90_api.h"
#include "window_attention_sm90_launch.cuh"

namespace sinkops::cuda::sm90 {

namespace {
bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }
}  // namespace

bool window_attention_sm90_takes(const WindowAttentionParams& p, int smem_optin) {
  const int d = p.d > p.d_v ? p.d : p.d_v;
  if (d > 128 || p.d % 8 || p.d_v % 8 || p.h_k < 1 || p.h_q % p.h_k) return false;
  // cp.async and the output stores move 16-byte chunks: every row start 16-byte aligned.
  // Offsets inside a segment are 32-bit: row < 128 x stride < 2^23 (and the head strides) fit int32.
  for (int64_t stride : {p.q_row_stride, p.q_head_stride, p.k_row_stride, p.k_head_stride, p.v_row_stride,
                         p.v_head_stride, p.out_row_stride, p.out_head_stride})
    if (stride % 8 || stride < 0 || stride >= (int64_t(1) << 23)) return false;
  bool fits = false;
  head_dim_switch(Sm90WindowHeadDims{}, d, "window_attention (sm90)", [&](auto head_dim) {
    fits = window_attention_smem_bytes<decltype(head_dim)::value>() <= smem_optin;
  });
  return fits;
}

bool window_attention_sm90_aligned(const WindowAttentionParams& p) {
  return aligned16(p.q) && aligned16(p.k) && aligned16(p.v) && aligned16(p.out);
}

void window_attention(const WindowAttentionParams& p, void* stream) {
  const int d = p.d > p.d_v ? p.d : p.d_v;
  auto st = static_cast<cudaStream_t>(stream);
  head_dim_switch(Sm90WindowHeadDims{}, d, "window_attention (sm90)", [&](auto head_dim) {
    constexpr int kHeadDim = decltype(head_dim)::value;
    // up to 64 folded heads: a warpgroup's 64 rows
    const window_attention::LaunchShape s = window_attention::fold_heads(p, window_attention_cta_rows<kHeadDim>(), 64);
    const dim3 grid = window_attention::launch_grid(p, s);
    dtype_switch(p.dtype, "window_attention (sm90)", [&](auto t) {
      using T = typename decltype(t)::type;
      sink_switch(p.sink_mode, [&](auto sink) {
        launch_window_attention<T, kHeadDim, typename decltype(sink)::type>(p, s, grid, st);
      });
    });
  });
}

}  // namespace sinkops::cuda::sm90
