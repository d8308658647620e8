// Lazy rescaling of the online softmax (FlashAttention-4's; bench/NOTES.md "Prefill v1.3"): a
// row's running max m moves only when a block's max exceeds it by more than kRescaleThreshold
// log2 units. Below that, the block's terms 2^(x - m) are taken against the stale m (at most 2^8:
// exact in fp32 and inside bf16's range) and neither O nor the row sum is rescaled. Every term and
// O of a row stays relative to the same m, so the softmax is the same; only a max_logits output
// needs the true max, kept beside it. After a row's first blocks its max rarely grows by 8 log2
// units, so the O rescale and its bookkeeping are skipped almost always.
// SINKOPS_RESCALE_THRESHOLD: tuning runs only (0: rescale at every new max, the eager rule).
#pragma once
#include <cuda_runtime.h>

#include <cfloat>

namespace sinkops::cuda {

#ifndef SINKOPS_RESCALE_THRESHOLD
#define SINKOPS_RESCALE_THRESHOLD 8.0f
#endif
constexpr float kRescaleThreshold = SINKOPS_RESCALE_THRESHOLD;  // log2 units

// The running max after a block whose max is x_max, from m (the current one, or any value >= it):
// m unless x_max exceeds it by more than `threshold` (kRescaleThreshold in the units of m and
// x_max; finite: a caller whose units make it overflow clamps it to FLT_MAX). Written as a
// difference so that the infinities come out right: m = -inf moves to the first finite or +inf
// x_max (+inf > threshold) and stays at x_max = -inf (NaN > threshold is false), a finite m moves
// to x_max = +inf (a +inf key0 sink), and m = +inf stays.
__device__ __forceinline__ float lazy_max(float m, float x_max, float threshold) {
  return x_max - m > threshold ? x_max : m;
}

}  // namespace sinkops::cuda
