// Params of window_attention's backward (docs/DESIGN.md §6): the forward's field list (the call
// being differentiated: out and lse are what it returned, read here) plus the gradients.
// The field list below is the only place the backward's own fields are spelled (params_fields.h).
#pragma once
#include "sinkops/params_fields.h"
#include "sinkops/window_attention_params.h"

// The kernels write every element of dq, dk, dv and dsink_rows (no caller zero-fill): the rows of
// segments their gradients, rows in no segment zeros (docs/DESIGN.md §6: exactly those rows when
// cu_seqlens is non-decreasing and no segment is longer than max_seqlen; otherwise some rows are
// unspecified, never out of bounds). A call where nothing attends (batch 0, max_seqlen 0) launches
// nothing and writes nothing. The row workspaces are [h_q, total_q] float32, contiguous (head
// stride total_q).
#define SINKOPS_WINDOW_ATTENTION_BACKWARD_PARAMS(STATIC, CALL, NESTED)                             \
  SINKOPS_WINDOW_ATTENTION_PARAMS(STATIC, CALL, NESTED) /* out, lse: the forward's results */      \
  CALL(const void*, dout, nullptr)     /* [total_q, h_q, d_v]   last dim contiguous */            \
  CALL(const float*, dlse, nullptr)    /* [h_q, total_q] gradient of lse; nullptr: none */         \
  CALL(int64_t, dlse_head_stride, 0)                                                              \
  CALL(void*, dq, nullptr)             /* [total_q, h_q, d]     last dim contiguous */            \
  CALL(void*, dk, nullptr)             /* [total_k, h_k, d]     last dim contiguous */            \
  CALL(void*, dv, nullptr)             /* [total_k, h_k, d_v]   last dim contiguous */            \
  CALL(float*, row_r, nullptr)         /* [h_q, total_q] written by the dq kernel: 1 - p_sink */   \
  CALL(float*, row_delta, nullptr)     /* [h_q, total_q] written by the dq kernel: r D - dlse */   \
  CALL(float*, dsink_rows, nullptr)    /* [h_q, total_q] when sinks: each row's sink gradient (0 in no segment) */ \
  STATIC(int64_t, dout_row_stride, 0)                                                             \
  STATIC(int64_t, dout_head_stride, 0)                                                            \
  STATIC(int64_t, dq_row_stride, 0)                                                               \
  STATIC(int64_t, dq_head_stride, 0)                                                              \
  STATIC(int64_t, dk_row_stride, 0)                                                               \
  STATIC(int64_t, dk_head_stride, 0)                                                              \
  STATIC(int64_t, dv_row_stride, 0)                                                               \
  STATIC(int64_t, dv_head_stride, 0)

namespace sinkops {
SINKOPS_PARAMS_STRUCT(WindowAttentionBackwardParams, SINKOPS_WINDOW_ATTENTION_BACKWARD_PARAMS)
}  // namespace sinkops
