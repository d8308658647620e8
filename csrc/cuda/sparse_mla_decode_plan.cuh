// The split-k plan of sparse MLA decode and its workspace layout, shared by the kernel families
// (sm80: sparse_mla_decode.cuh, 32-key tiles, 64 heads per CTA; sm90: sm90/sparse_mla_decode_sm90.cuh,
// 64-key blocks, 64 heads; sm90 few heads: sm90/sparse_mla_decode_few_heads_sm90.cuh, 64-key blocks,
// every head of a row (<= 32) in one CTA, two CTAs per SM) and the combine kernel
// (sparse_mla_decode.cu). One rule sizes all three from their PlanShape.
#pragma once
#include <cstdint>

#include "sinkops/sparse_mla_params.h"

namespace sinkops::cuda::sparse_mla_decode {

constexpr int kPartialDv = 512;  // channels of a partial output row

// What a kernel family's plan counts in.
struct PlanShape {
  int keys_per_tile;  // key granularity of a split
  int heads_per_cta;  // heads of a row one CTA holds
  int ctas_per_sm;    // CTAs resident per SM
};

// The key list of a row: the main pool's top-k, then the extra pool's (topk 0 when absent).
__host__ __device__ inline int total_topk(const SparseMlaDecodeParams& p) { return p.pool.topk + p.extra.topk; }

// The split-k plan (cuda_api.h: sparse_mla_decode_plan): a function of shapes and the SM count
// only, so it is graph capturable. Splits only when b * s_q * head blocks CTAs leave CTA slots idle.
inline void plan_splits(SparseMlaDecodeParams& p, int num_sms, const PlanShape& shape) {
  const int tiles = (total_topk(p) + shape.keys_per_tile - 1) / shape.keys_per_tile;
  p.num_splits = 1;
  p.tiles_per_split = tiles;
  const int64_t head_blocks = (p.h_q + shape.heads_per_cta - 1) / shape.heads_per_cta;
  const int64_t ctas = int64_t(p.b) * p.s_q * head_blocks;
  const int64_t slots = int64_t(num_sms) * shape.ctas_per_sm;
  if (tiles <= 1 || ctas <= 0 || ctas >= slots) return;
  // Fill exactly one wave of the resident slots: floor, never a second wave.
  int splits = int(slots / ctas);
  splits = splits < tiles ? splits : tiles;
  p.tiles_per_split = (tiles + splits - 1) / splits;
  p.num_splits = (tiles + p.tiles_per_split - 1) / p.tiles_per_split;  // no empty split
}

// Workspace: unnormalized partial outputs [rows][splits][h_q][512] f32, then (max, sum) [rows][splits][h_q].
__host__ __device__ inline int64_t partial_o_elems(const SparseMlaDecodeParams& p, int splits) {
  return int64_t(p.b) * p.s_q * splits * p.h_q * kPartialDv;
}
inline int64_t workspace_bytes_for(const SparseMlaDecodeParams& p, int splits) {
  if (splits <= 1) return 0;
  return partial_o_elems(p, splits) * 4 + int64_t(p.b) * p.s_q * splits * p.h_q * 8;
}

}  // namespace sinkops::cuda::sparse_mla_decode
