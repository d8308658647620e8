// Params of window_attention (DESIGN.md §2.1), flash-attention's Flash_fwd_params style:
// raw pointers, 64-bit strides in elements, scalar flags. Filled by sinkops/_native.py.
#pragma once
#include "sinkops/common.h"

namespace sinkops {

struct WindowAttentionParams {
  DType dtype = DType::kBFloat16;  // of q, k, v, out

  const void* q = nullptr;      // [total_q, h_q, d]     last dim contiguous
  const void* k = nullptr;      // [total_k, h_k, d]     last dim contiguous
  const void* v = nullptr;      // [total_k, h_k, d_v]   last dim contiguous
  void* out = nullptr;          // [total_q, h_q, d_v]   last dim contiguous
  float* lse = nullptr;         // [h_q, total_q]        natural log, +inf for rows that see no key
  const int32_t* cu_seqlens_q = nullptr;  // [batch + 1]
  const int32_t* cu_seqlens_k = nullptr;  // [batch + 1]
  const float* sinks = nullptr;           // [h_q], nullptr when sink_mode == kNone

  // Strides in elements (64-bit: tensors may exceed 2^31 elements).
  int64_t q_row_stride = 0, q_head_stride = 0;
  int64_t k_row_stride = 0, k_head_stride = 0;
  int64_t v_row_stride = 0, v_head_stride = 0;
  int64_t out_row_stride = 0, out_head_stride = 0;
  int64_t lse_head_stride = 0;  // usually total_q

  int64_t total_q = 0, total_k = 0;
  int32_t batch = 0, h_q = 0, h_k = 0, d = 0, d_v = 0;
  int32_t max_seqlen_q = 0, max_seqlen_k = 0;  // upper bounds from the caller (no host sync)

  // flash-attention convention, causal already folded in (right = 0):
  // query i of a segment sees keys j with i + sk - sq - left <= j <= i + sk - sq + right; -1 = unbounded.
  int32_t window_left = -1, window_right = -1;
  float scale = 1.0f;  // softmax scale; never applied to the sink
  SinkMode sink_mode = SinkMode::kNone;
};

}  // namespace sinkops
