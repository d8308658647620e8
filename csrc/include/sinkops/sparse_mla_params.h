// Params of sparse_mla_prefill (docs/DESIGN.md §2.2) and sparse_mla_decode (§2.3), FlashMLA's
// params.h style: a shape comment on every pointer, 64-bit strides in elements (bytes for caches).
// The field lists below are the only place the fields are spelled (params_fields.h).
#pragma once
#include "sinkops/params_fields.h"

// Any int32 in indices / topk_length is safe: an index < 0 or past the pool is an invalid key,
// topk_length is clamped to [0, topk].
#define SINKOPS_SPARSE_MLA_PREFILL_PARAMS(STATIC, CALL, NESTED)                                     \
  CALL(const void*, q, nullptr)              /* [s_q, h_q, d_qk] bf16, last dim contiguous */        \
  CALL(const void*, kv, nullptr)             /* [s_kv, 1, d_qk] bf16, last dim contiguous; values = first d_v channels */ \
  CALL(const int32_t*, indices, nullptr)     /* [s_q, 1, topk]; < 0 or >= s_kv is invalid */        \
  CALL(const int32_t*, topk_length, nullptr) /* [s_q] or nullptr: only the first topk_length[i] indices are read */ \
  CALL(const float*, attn_sink, nullptr)     /* [h_q] or nullptr (null-logit sink) */               \
  CALL(void*, out, nullptr)                  /* [s_q, h_q, d_v] bf16 */                             \
  CALL(float*, max_logits, nullptr)          /* [s_q, h_q] contiguous; -inf for empty rows */        \
  CALL(float*, lse, nullptr)                 /* [s_q, h_q] contiguous; natural log, sink excluded, +inf for empty rows */ \
  STATIC(int64_t, q_row_stride, 0)                                                                  \
  STATIC(int64_t, q_head_stride, 0)                                                                 \
  STATIC(int64_t, kv_row_stride, 0)                                                                 \
  STATIC(int64_t, indices_row_stride, 0)     /* stride of dim 0 (dim 2 is contiguous) */            \
  STATIC(int64_t, out_row_stride, 0)                                                                \
  STATIC(int64_t, out_head_stride, 0)                                                               \
  CALL(int64_t, s_q, 0)                                                                             \
  CALL(int64_t, s_kv, 0)                                                                            \
  STATIC(int32_t, h_q, 0)                                                                           \
  STATIC(int32_t, d_qk, 0)                                                                          \
  STATIC(int32_t, d_v, 0)                                                                           \
  STATIC(int32_t, topk, 0)                                                                          \
  STATIC(float, sm_scale, 1.0f)

// One paged FP8 KV pool (the main one, or the "extra" one attended in the same softmax).
#define SINKOPS_KV_POOL_PARAMS(STATIC, CALL, NESTED)                                                \
  CALL(const uint8_t*, cache, nullptr)       /* [num_blocks, block_size, 1, bytes_per_token] view; read through block_stride */ \
  STATIC(int64_t, block_stride, 0)           /* bytes between blocks (kv_cache.stride(0)); may exceed block_size * bytes_per_token */ \
  CALL(int64_t, num_blocks, 0)                                                                      \
  STATIC(int32_t, block_size, 0)                                                                    \
  CALL(const int32_t*, indices, nullptr)     /* [b, s_q, topk] slot = block * block_size + offset; -1 / out of range invalid */ \
  STATIC(int64_t, indices_batch_stride, 0)                                                          \
  STATIC(int64_t, indices_row_stride, 0)     /* dim 2 contiguous */                                 \
  CALL(const int32_t*, topk_length, nullptr) /* [b] or nullptr */                                   \
  STATIC(int32_t, topk, 0)

#define SINKOPS_SPARSE_MLA_DECODE_PARAMS(STATIC, CALL, NESTED)                                      \
  STATIC(KvCacheLayout, layout, KvCacheLayout::kV4) /* v4: d_qk 512; v32: d_qk 576 (kv_cache_layout.h) */ \
  CALL(const void*, q, nullptr)              /* [b, s_q, h_q, d_qk] bf16, last dim contiguous */     \
  STATIC(int64_t, q_batch_stride, 0)                                                                \
  STATIC(int64_t, q_row_stride, 0)                                                                  \
  STATIC(int64_t, q_head_stride, 0)                                                                 \
  NESTED(KvPool, pool)                       /* main pool */                                        \
  NESTED(KvPool, extra)                      /* extra.cache == nullptr when absent */                \
  CALL(const float*, attn_sink, nullptr)     /* [h_q] or nullptr */                                 \
  CALL(void*, out, nullptr)                  /* [b, s_q, h_q, 512] bf16, contiguous */              \
  CALL(float*, lse, nullptr)                 /* [b, h_q, s_q] contiguous; natural log, sink excluded, +inf for empty rows */ \
  CALL(int32_t, b, 0)                                                                               \
  STATIC(int32_t, s_q, 0)                                                                           \
  STATIC(int32_t, h_q, 0)                                                                           \
  STATIC(int32_t, d_qk, 0)                                                                          \
  STATIC(int32_t, d_v, 512)                                                                         \
  STATIC(float, sm_scale, 1.0f)                                                                     \
  /* Split-k plan, set by sparse_mla_decode_plan() (cuda_api.h) from shapes and the SM count: */    \
  CALL(int32_t, num_splits, 0)                                                                      \
  CALL(int32_t, tiles_per_split, 0)                                                                 \
  CALL(void*, workspace, nullptr)            /* the plan's scratch; nullptr when it needs none */   \
  CALL(int64_t, workspace_bytes, 0)

namespace sinkops {
SINKOPS_PARAMS_STRUCT(SparseMlaPrefillParams, SINKOPS_SPARSE_MLA_PREFILL_PARAMS)
SINKOPS_PARAMS_STRUCT(KvPool, SINKOPS_KV_POOL_PARAMS)
SINKOPS_PARAMS_STRUCT(SparseMlaDecodeParams, SINKOPS_SPARSE_MLA_DECODE_PARAMS)
}  // namespace sinkops
