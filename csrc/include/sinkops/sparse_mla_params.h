// Params of sparse_mla_prefill (DESIGN.md §2.2) and sparse_mla_decode (§2.3), FlashMLA's
// params.h style: a shape comment on every pointer, 64-bit strides in elements (bytes for caches).
#pragma once
#include "sinkops/common.h"

namespace sinkops {

struct SparseMlaPrefillParams {
  const void* q = nullptr;             // [s_q, h_q, d_qk] bf16, last dim contiguous
  const void* kv = nullptr;            // [s_kv, 1, d_qk] bf16, last dim contiguous; values = first d_v channels
  const int32_t* indices = nullptr;    // [s_q, 1, topk]; < 0 or >= s_kv is invalid
  const int32_t* topk_length = nullptr;  // [s_q] or nullptr: only the first topk_length[i] indices are read
  const float* attn_sink = nullptr;    // [h_q] or nullptr (null-logit sink)
  void* out = nullptr;                 // [s_q, h_q, d_v] bf16
  float* max_logits = nullptr;         // [s_q, h_q] contiguous; -inf for empty rows
  float* lse = nullptr;                // [s_q, h_q] contiguous; natural log, sink excluded, +inf for empty rows

  int64_t q_row_stride = 0, q_head_stride = 0;
  int64_t kv_row_stride = 0;
  int64_t indices_row_stride = 0;      // stride of dim 0 (dim 2 is contiguous)
  int64_t out_row_stride = 0, out_head_stride = 0;

  int64_t s_q = 0, s_kv = 0;
  int32_t h_q = 0, d_qk = 0, d_v = 0, topk = 0;
  float sm_scale = 1.0f;
};

// One paged FP8 KV pool (the main one, or the "extra" one attended in the same softmax).
struct KvPool {
  const uint8_t* cache = nullptr;       // [num_blocks, block_size, 1, bytes_per_token] view; read through block_stride
  int64_t block_stride = 0;             // bytes between blocks (kv_cache.stride(0)); may exceed block_size * bytes_per_token
  int64_t num_blocks = 0;
  int32_t block_size = 0;
  const int32_t* indices = nullptr;     // [b, s_q, topk] slot = block * block_size + offset; -1 / out of range invalid
  int64_t indices_batch_stride = 0, indices_row_stride = 0;  // dim 2 contiguous
  const int32_t* topk_length = nullptr; // [b] or nullptr
  int32_t topk = 0;
};

struct SparseMlaDecodeParams {
  KvCacheLayout layout = KvCacheLayout::kV4;  // v4: d_qk 512 (448 fp8 + 64 bf16); v32: d_qk 576 (512 fp8 + 64 bf16)
  const void* q = nullptr;              // [b, s_q, h_q, d_qk] bf16, last dim contiguous
  int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;
  KvPool pool;                          // main pool
  KvPool extra;                         // extra.cache == nullptr when absent
  const float* attn_sink = nullptr;     // [h_q] or nullptr
  void* out = nullptr;                  // [b, s_q, h_q, 512] bf16, contiguous
  float* lse = nullptr;                 // [b, h_q, s_q] contiguous; natural log, sink excluded, +inf for empty rows

  int32_t b = 0, s_q = 0, h_q = 0, d_qk = 0, d_v = 512;
  float sm_scale = 1.0f;

  // Split-k scratch, sized from shapes alone by the launcher's workspace query; may be nullptr
  // when the workspace query returned 0.
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
};

}  // namespace sinkops
