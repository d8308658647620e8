// The split-k plan of sparse MLA decode and its workspace layout, shared by both kernel families
// (sm80: sparse_mla_decode.cuh, 32-key tiles; sm90: sm90/sparse_mla_decode_sm90.cuh, 64-key
// blocks) and the combine kernel (sparse_mla_decode.cu). Both families put 64 heads in a CTA and
// fit one CTA per SM, so the same rule sizes both; only the key granularity differs.
#pragma once
#include <cstdint>

#include "sinkops/sparse_mla_params.h"

namespace sinkops::cuda::sparse_mla_decode {

constexpr int kPlanHeadsPerCta = 64;
constexpr int kPartialDv = 512;  // channels of a partial output row

// The key list of a row: the main pool's top-k, then the extra pool's (topk 0 when absent).
__host__ __device__ inline int total_topk(const SparseMlaDecodeParams& p) { return p.pool.topk + p.extra.topk; }

// The split-k plan (cuda_api.h: sparse_mla_decode_plan): a function of shapes and the SM count
// only, so it is graph capturable. Splits only when b * s_q * head blocks CTAs leave SMs idle.
inline void plan_splits(SparseMlaDecodeParams& p, int num_sms, int keys_per_tile) {
  const int tiles = (total_topk(p) + keys_per_tile - 1) / keys_per_tile;
  p.num_splits = 1;
  p.tiles_per_split = tiles;
  const int64_t head_blocks = (p.h_q + kPlanHeadsPerCta - 1) / kPlanHeadsPerCta;
  const int64_t ctas = int64_t(p.b) * p.s_q * head_blocks;
  if (tiles <= 1 || ctas <= 0 || ctas >= num_sms) return;
  // One CTA per SM fits (about 160 KB smem), so fill exactly one wave: floor, never a second wave.
  int splits = int(num_sms / ctas);
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
