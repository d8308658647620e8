// Segment and window bounds of varlen window attention (docs/DESIGN.md §2.1), shared by the
// sm80 (window_attention_kernel.cuh) and sm90 (sm90/window_attention_sm90.cuh) kernels. Any int32
// values of cu_seqlens and any window keep every index these return inside the packed tensors.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace sinkops::cuda::window_attention {

// Window bounds of one query row (segment-local), clipped into [0, sk] / [-1, sk - 1] so they fit
// int32 whatever the window; the row sees keys lo..hi (empty when hi < lo).
__device__ __forceinline__ void row_bounds(int64_t i, int64_t off, int left, int right, int sk, int& lo, int& hi) {
  const int64_t diag = i + off;
  int64_t l = left >= 0 ? diag - left : 0;
  int64_t h = right >= 0 ? diag + right : int64_t(sk) - 1;
  l = l < 0 ? 0 : (l > sk ? sk : l);
  h = h > int64_t(sk) - 1 ? int64_t(sk) - 1 : (h < -1 ? -1 : h);
  lo = static_cast<int>(l);
  hi = static_cast<int>(h);
}

// The same in 32-bit arithmetic, from diag = i + sk - sq of a query row 0 <= i < sq (so
// -2^31 < diag < sk: no int32 overflow; nothing below overflows either). The sm90 kernel's per-step
// bounds: the 64-bit version costs ~25 instructions a call.
__device__ __forceinline__ void row_bounds_diag(int diag, int left, int right, int sk, int& lo, int& hi) {
  lo = left < 0 || diag < left ? 0 : diag - left;  // diag - left >= 0 here
  lo = lo > sk ? sk : lo;
  hi = right < 0 || diag > sk - 1 - right ? sk - 1 : diag + right;  // sk - 1 - right >= -2^31
  hi = hi < -1 ? -1 : hi;
}

// Segment bounds from cu_seqlens, clamped so that any int32 values stay inside the packed
// tensor: [lo, lo + len) with 0 <= lo <= lo + len <= total (a decreasing segment is empty).
__device__ __forceinline__ void segment_bounds(const int32_t* cu, int b, int64_t total, int64_t& lo, int& len) {
  int64_t a = cu[b], e = cu[b + 1];
  a = a < 0 ? 0 : (a > total ? total : a);
  e = e < a ? a : (e > total ? total : e);
  lo = a;
  len = static_cast<int>(e - a);  // cu values are int32, so a segment fits int32
}

// Segment b of the packed q and k tokens (segment_bounds of each): any params struct with the
// window fields (WindowAttentionParams, WindowAttentionBackwardParams).
template <class Params>
__device__ __forceinline__ void segment_pair(const Params& p, int b, int64_t& q_start, int& sq, int64_t& k_start,
                                             int& sk) {
  segment_bounds(p.cu_seqlens_q, b, p.total_q, q_start, sq);
  segment_bounds(p.cu_seqlens_k, b, p.total_k, k_start, sk);
}

}  // namespace sinkops::cuda::window_attention
