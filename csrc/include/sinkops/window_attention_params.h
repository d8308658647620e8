// Params of window_attention (docs/DESIGN.md §2.1), flash-attention's Flash_fwd_params style:
// raw pointers with a shape comment each, 64-bit strides in elements, scalar flags.
// The field list below is the only place the fields are spelled (params_fields.h).
#pragma once
#include "sinkops/params_fields.h"

// Segment b of the packed q (k) tokens is [lo, max(lo, hi)) with lo = clamp(cu_seqlens[b], 0, total)
// and hi = clamp(cu_seqlens[b + 1], 0, total): any int32 values are safe (a decreasing segment is
// empty); rows outside every segment are not written.
#define SINKOPS_WINDOW_ATTENTION_PARAMS(STATIC, CALL, NESTED)                                   \
  STATIC(DType, dtype, DType::kBFloat16)      /* of q, k, v, out */                          \
  CALL(const void*, q, nullptr)               /* [total_q, h_q, d]     last dim contiguous */ \
  CALL(const void*, k, nullptr)               /* [total_k, h_k, d]     last dim contiguous */ \
  CALL(const void*, v, nullptr)               /* [total_k, h_k, d_v]   last dim contiguous */ \
  CALL(void*, out, nullptr)                   /* [total_q, h_q, d_v]   last dim contiguous */ \
  CALL(float*, lse, nullptr)                  /* [h_q, total_q] natural log, +inf for rows that see no key; nullptr: not asked for */ \
  CALL(const int32_t*, cu_seqlens_q, nullptr) /* [batch + 1] */                               \
  CALL(const int32_t*, cu_seqlens_k, nullptr) /* [batch + 1] */                               \
  CALL(const float*, sinks, nullptr)          /* [h_q]; nullptr when sink_mode == kNone */    \
  STATIC(int64_t, q_row_stride, 0)                                                            \
  STATIC(int64_t, q_head_stride, 0)                                                           \
  STATIC(int64_t, k_row_stride, 0)                                                            \
  STATIC(int64_t, k_head_stride, 0)                                                           \
  STATIC(int64_t, v_row_stride, 0)                                                            \
  STATIC(int64_t, v_head_stride, 0)                                                           \
  STATIC(int64_t, out_row_stride, 0)                                                          \
  STATIC(int64_t, out_head_stride, 0)                                                         \
  CALL(int64_t, lse_head_stride, 0)           /* usually total_q */                           \
  CALL(int64_t, total_q, 0)                                                                   \
  CALL(int64_t, total_k, 0)                                                                   \
  CALL(int32_t, batch, 0)                                                                     \
  STATIC(int32_t, h_q, 0)                                                                     \
  STATIC(int32_t, h_k, 0)                                                                     \
  STATIC(int32_t, d, 0)                                                                       \
  STATIC(int32_t, d_v, 0)                                                                     \
  CALL(int32_t, max_seqlen_q, 0)              /* upper bound from the caller (no host sync) */ \
  CALL(int32_t, max_seqlen_k, 0)                                                              \
  /* flash-attention convention, causal already folded in (right = 0): query i of a segment */ \
  /* sees keys j with i + sk - sq - left <= j <= i + sk - sq + right; -1 = unbounded. */       \
  STATIC(int32_t, window_left, -1)                                                            \
  STATIC(int32_t, window_right, -1)                                                           \
  STATIC(float, scale, 1.0f)                  /* softmax scale; never applied to the sink */  \
  STATIC(SinkMode, sink_mode, SinkMode::kNone)

namespace sinkops {
SINKOPS_PARAMS_STRUCT(WindowAttentionParams, SINKOPS_WINDOW_ATTENTION_PARAMS)
}  // namespace sinkops
