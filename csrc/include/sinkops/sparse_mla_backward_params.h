// Params of sparse_mla_prefill's backward on the CUDA backend (docs/DESIGN.md §6): the forward's
// field list (the call being differentiated: out and lse are what it returned, read here; max_logits
// unused) plus the gradients and the per-chunk staging. The field list below is the only place the
// backward's own fields are spelled (params_fields.h).
//
// One call runs queries [s0, s0 + chunk_rows) (the caller loops over chunks, as the Triton backward
// does: P and dX are staged per chunk): the dq kernel writes dq and dsink_rows of those rows and the
// bf16 stages, the dkv kernel adds every valid (query, position)'s key gradient into dkv_acc with
// unordered float32 reductions (sm_90a: bulk reductions of 256-byte rows) or, deterministic, writes it
// to det_stage for the caller's ordered sum.
#pragma once
#include "sinkops/params_fields.h"
#include "sinkops/sparse_mla_params.h"

#define SINKOPS_SPARSE_MLA_BACKWARD_PARAMS(STATIC, CALL, NESTED)                                      \
  SINKOPS_SPARSE_MLA_PREFILL_PARAMS(STATIC, CALL, NESTED) /* out, lse: the forward's results */      \
  CALL(const void*, dout, nullptr)      /* [s_q, h_q, d_v] bf16, last dim contiguous */              \
  CALL(const float*, dlse, nullptr)     /* [s_q, h_q] contiguous gradient of lse; nullptr: none */    \
  CALL(void*, dq, nullptr)              /* [s_q, h_q, d_qk] bf16, last dim contiguous */             \
  CALL(float*, dsink_rows, nullptr)     /* [s_q, h_q] contiguous when attn_sink: -p_sink <dO, O> */  \
  CALL(float*, dkv_acc, nullptr)        /* [s_kv + 1, d_qk] float32, 16-byte aligned, zeroed by the caller (not deterministic) */ \
  CALL(float*, det_stage, nullptr)      /* deterministic: [chunk_rows, topk, d_qk] float32 key gradients */ \
  CALL(void*, p_stage, nullptr)         /* [chunk_rows, h_q, stage_topk] bf16: r 2^(S c - lse2) */   \
  CALL(void*, dx_stage, nullptr)        /* [chunk_rows, h_q, stage_topk] bf16: scale dX */           \
  CALL(int64_t, s0, 0)                  /* the chunk's first query */                               \
  CALL(int64_t, chunk_rows, 0)          /* queries in this chunk */                                 \
  CALL(int64_t, dkv_query_group, 1)     /* the dkv grid's query groups (sparse_mla_backward_sm90.cuh) */ \
  STATIC(int32_t, stage_topk, 0)        /* topk rounded up to a multiple of 8 (16-byte stage rows) */ \
  STATIC(int32_t, deterministic, 0)                                                                 \
  STATIC(int64_t, dout_row_stride, 0)                                                               \
  STATIC(int64_t, dout_head_stride, 0)                                                              \
  STATIC(int64_t, dq_row_stride, 0)                                                                 \
  STATIC(int64_t, dq_head_stride, 0)

namespace sinkops {
SINKOPS_PARAMS_STRUCT(SparseMlaBackwardParams, SINKOPS_SPARSE_MLA_BACKWARD_PARAMS)
}  // namespace sinkops
