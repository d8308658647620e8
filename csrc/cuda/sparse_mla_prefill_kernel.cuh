// Sparse MLA prefill over bf16 KV with the DeepSeek-V4 null-logit sink (DESIGN.md §2.2).
//
// One CTA = one query row x a tile of kHeads = 16 * kMTiles heads (kMTiles in {1, 2, 4}, so
// Hq = 128 runs as 2 CTAs of 64 heads, Hq = 8 as one 16-head tile with 8 masked rows).
// The query's top-k KV rows are gathered 64 at a time into shared memory with cp.async
// (double-buffered when shared memory allows); K == V, so the same tile feeds both MMAs.
//
// 8 warps. The kWarpsPerM = 8 / kMTiles warps of an "m-group" share one 16-head m-tile:
//   S = Q K^T : warp `part` of the group computes 16 heads x (64 / kWarpsPerM) keys over all d_qk;
//   softmax   : the group agrees on the row max through shared memory (named barrier per group);
//   O += P V  : P (bf16, 16 x 64) goes through shared memory and warp `part` accumulates
//               16 heads x (512 / kWarpsPerM) value channels: at most 128 fp32 registers/thread.
// The running sum l stays per warp (all warps of a group scale by the same max) and is
// combined once at the end; the null sink is folded then (sink_policy.cuh).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "sinkops/sparse_mla_params.h"
#include "kernel_launch.cuh"
#include "sink_policy.cuh"
#include "sparse_mla_common.cuh"

namespace sinkops::cuda::mla {

constexpr int kPrefillThreads = 256;
constexpr int kPrefillWarps = kPrefillThreads / 32;
constexpr int kBlockKeys = 64;    // KV rows gathered per pipeline step
constexpr int kValueDim = 512;    // d_v; the only value width the contract has

// Shared-memory bytes for a tile config; the launcher and the kernel both use this.
struct PrefillSmemLayout {
  int q_bytes, kv_stage_bytes, p_bytes, red_bytes, valid_bytes;
  __host__ __device__ PrefillSmemLayout(int m_tiles, int stages, int d_qk) {
    q_bytes = 16 * m_tiles * d_qk * 2;
    kv_stage_bytes = kBlockKeys * d_qk * 2;
    p_bytes = 16 * m_tiles * kBlockKeys * 2;
    red_bytes = kPrefillWarps * 16 * 4;  // one float per (warp, row of its m-tile)
    valid_bytes = stages * kBlockKeys * 4;
  }
  __host__ __device__ int total(int stages) const {
    return q_bytes + stages * kv_stage_bytes + p_bytes + red_bytes + valid_bytes;
  }
};

template <int kMTiles, int kStages>
__global__ void __launch_bounds__(kPrefillThreads, 1)
    sparse_mla_prefill_kernel(const SparseMlaPrefillParams p) {
  constexpr int kHeads = 16 * kMTiles;
  constexpr int kWarpsPerM = kPrefillWarps / kMTiles;
  constexpr int kKeysPerWarp = kBlockKeys / kWarpsPerM;  // 32, 16 or 8
  constexpr int kSTiles = kKeysPerWarp / 8;              // n-tiles of S per warp
  constexpr int kDvPerWarp = kValueDim / kWarpsPerM;     // 256, 128 or 64
  constexpr int kOTiles = kDvPerWarp / 8;                // n-tiles of O per warp
  static_assert(kSTiles == 1 || kSTiles % 2 == 0, "S n-tiles are loaded in pairs");

  const int d_qk = p.d_qk;
  const int row_chunks = d_qk / 8;  // 16-byte chunks per Q / KV row
  const int64_t q_idx = blockIdx.x;
  const int head0 = blockIdx.y * kHeads;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int m_tile = warp / kWarpsPerM, part = warp % kWarpsPerM;
  const int g = lane >> 2, t = lane & 3;

  SINKOPS_DYNAMIC_SMEM(smem, 128);
  const PrefillSmemLayout lay(kMTiles, kStages, d_qk);
  __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* sKV = reinterpret_cast<__nv_bfloat16*>(smem + lay.q_bytes);
  __nv_bfloat16* sP =
      reinterpret_cast<__nv_bfloat16*>(smem + lay.q_bytes + kStages * lay.kv_stage_bytes);
  float* sRed = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(sP) + lay.p_bytes);
  int* sValid = reinterpret_cast<int*>(reinterpret_cast<unsigned char*>(sRed) + lay.red_bytes);

  const int32_t* idx_row = p.indices + q_idx * p.indices_row_stride;
  int n_keys = p.topk;
  if (p.topk_length != nullptr) n_keys = min(max(p.topk_length[q_idx], 0), p.topk);
  const int n_blocks = (n_keys + kBlockKeys - 1) / kBlockKeys;

  const __nv_bfloat16* q_base = static_cast<const __nv_bfloat16*>(p.q) + q_idx * p.q_row_stride;
  const __nv_bfloat16* kv_base = static_cast<const __nv_bfloat16*>(p.kv);

  // Q tile: kHeads rows; heads past h_q are zero-filled (their outputs are never written).
  for (int c = tid; c < kHeads * row_chunks; c += kPrefillThreads) {
    const int r = c / row_chunks, ch = c % row_chunks;
    const bool ok = head0 + r < p.h_q;
    const __nv_bfloat16* src = ok ? q_base + (int64_t)(head0 + r) * p.q_head_stride + ch * 8 : q_base;
    cp_async_16_zfill(sQ + swizzled_offset(r, ch, d_qk), src, ok);
  }

  // Gather KV block `blk` into stage `stage`: 8 threads per row (128 contiguous bytes per
  // instruction), 32 rows per pass. Invalid / past-topk rows are zero-filled, never read.
  auto gather = [&](int blk, int stage) {
    __nv_bfloat16* dst = sKV + stage * (lay.kv_stage_bytes / 2);
    const int sub = tid & 7;
#pragma unroll
    for (int pass = 0; pass < kBlockKeys / 32; ++pass) {
      const int r = (tid >> 3) + pass * 32;
      const int k = blk * kBlockKeys + r;
      int kv_row = -1;
      if (k < n_keys) {
        const int idx = idx_row[k];
        if (idx >= 0 && idx < p.s_kv) kv_row = idx;
      }
      const bool ok = kv_row >= 0;
      const __nv_bfloat16* src = ok ? kv_base + (int64_t)kv_row * p.kv_row_stride : kv_base;
      for (int ch = sub; ch < row_chunks; ch += 8)
        cp_async_16_zfill(dst + swizzled_offset(r, ch, d_qk), ok ? src + ch * 8 : src, ok);
      if (sub == 0) sValid[stage * kBlockKeys + r] = ok;
    }
  };

  if (n_blocks > 0) gather(0, 0);
  cp_async_commit();

  float o[kOTiles][4];
#pragma unroll
  for (int i = 0; i < kOTiles; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};  // rows g and g + 8, log2 units
  float row_sum[2] = {0.f, 0.f};              // this thread's columns only
  const float scale_log2 = p.sm_scale * sink::kLog2e;
  const int group_barrier = 1 + m_tile;
  const int group_threads = 32 * kWarpsPerM;
  const int key0 = part * kKeysPerWarp;
  const int dv0 = part * kDvPerWarp;
  const __nv_bfloat16* sQm = sQ + m_tile * 16 * d_qk;
  __nv_bfloat16* sPm = sP + m_tile * 16 * kBlockKeys;

  for (int blk = 0; blk < n_blocks; ++blk) {
    const int stage = kStages == 2 ? (blk & 1) : 0;
    cp_async_wait_all();
    __syncthreads();  // block `blk` landed; every warp is done with the other stage and sP
    if (kStages == 2 && blk + 1 < n_blocks) gather(blk + 1, stage ^ 1);
    cp_async_commit();

    const __nv_bfloat16* sK = sKV + stage * (lay.kv_stage_bytes / 2);

    // ---- S = Q K^T for 16 heads x kKeysPerWarp keys ----
    float s[kSTiles][4];
#pragma unroll
    for (int i = 0; i < kSTiles; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll 4
    for (int kc = 0; kc < row_chunks; kc += 2) {  // 16 channels per step
      uint32_t a[4];
      ldmatrix_x4(a, sQm + swizzled_offset(lane & 15, kc + (lane >> 4), d_qk));
      if constexpr (kSTiles == 1) {
        uint32_t b[2];
        ldmatrix_x2(b, sK + swizzled_offset(key0 + (lane & 7), kc + ((lane >> 3) & 1), d_qk));
        mma_bf16_16816(s[0], a, b[0], b[1]);
      } else {
#pragma unroll
        for (int j = 0; j < kSTiles / 2; ++j) {
          uint32_t b[4];
          const int key = key0 + j * 16 + (lane & 7) + ((lane >> 4) << 3);
          ldmatrix_x4(b, sK + swizzled_offset(key, kc + ((lane >> 3) & 1), d_qk));
          mma_bf16_16816(s[2 * j], a, b[0], b[1]);
          mma_bf16_16816(s[2 * j + 1], a, b[2], b[3]);
        }
      }
    }

    // ---- mask, block row max, agree on the max across the m-group ----
    const int* valid = sValid + stage * kBlockKeys;
    float bmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int i = 0; i < kSTiles; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + i * 8 + 2 * t + (e & 1);
        s[i][e] = valid[key] ? s[i][e] * scale_log2 : -INFINITY;
        bmax[e >> 1] = fmaxf(bmax[e >> 1], s[i][e]);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      bmax[r] = fmaxf(bmax[r], __shfl_xor_sync(0xffffffffu, bmax[r], 1));
      bmax[r] = fmaxf(bmax[r], __shfl_xor_sync(0xffffffffu, bmax[r], 2));
    }
    if constexpr (kWarpsPerM > 1) {
      if (t == 0) {
        sRed[warp * 16 + g] = bmax[0];
        sRed[warp * 16 + g + 8] = bmax[1];
      }
      named_barrier(group_barrier, group_threads);
#pragma unroll
      for (int w = 0; w < kWarpsPerM; ++w) {
        const int ww = m_tile * kWarpsPerM + w;
        bmax[0] = fmaxf(bmax[0], sRed[ww * 16 + g]);
        bmax[1] = fmaxf(bmax[1], sRed[ww * 16 + g + 8]);
      }
    }

    // ---- online softmax update; P to shared memory as bf16 ----
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float m_new = fmaxf(row_max[r], bmax[r]);
      // Rows with nothing valid yet keep m = -inf; subtracting 0 then keeps every term exactly 0.
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      const float rescale = exp2f(row_max[r] - m_use);
      row_max[r] = m_new;
      row_sum[r] *= rescale;
#pragma unroll
      for (int i = 0; i < kOTiles; ++i) {
        o[i][2 * r] *= rescale;
        o[i][2 * r + 1] *= rescale;
      }
#pragma unroll
      for (int i = 0; i < kSTiles; ++i) {
        const float p0 = exp2f(s[i][2 * r] - m_use), p1 = exp2f(s[i][2 * r + 1] - m_use);
        row_sum[r] += p0 + p1;
        const int row = g + 8 * r, col = key0 + i * 8 + 2 * t;
        *reinterpret_cast<uint32_t*>(sPm + swizzled_offset(row, col >> 3, kBlockKeys) + (col & 7)) =
            pack_bf16x2(p0, p1);
      }
    }
    named_barrier(group_barrier, group_threads);  // the group's P tile is complete

    // ---- O += P V over this warp's value channels (V = first 512 channels of the KV rows) ----
#pragma unroll
    for (int kk = 0; kk < kBlockKeys / 16; ++kk) {
      uint32_t a[4];
      ldmatrix_x4(a, sPm + swizzled_offset(lane & 15, kk * 2 + (lane >> 4), kBlockKeys));
#pragma unroll
      for (int j = 0; j < kOTiles / 2; ++j) {
        uint32_t b[4];
        const int key = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
        ldmatrix_x4_trans(b, sK + swizzled_offset(key, (dv0 >> 3) + j * 2 + (lane >> 4), d_qk));
        mma_bf16_16816(o[2 * j], a, b[0], b[1]);
        mma_bf16_16816(o[2 * j + 1], a, b[2], b[3]);
      }
    }

    if constexpr (kStages == 1) {
      __syncthreads();  // everyone is done with the single stage before it is overwritten
      if (blk + 1 < n_blocks) gather(blk + 1, 0);
      cp_async_commit();
    }
  }
  cp_async_wait_all();  // no cp.async may be in flight when the CTA exits

  // ---- combine the per-warp partial sums of the m-group ----
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
  }
  if constexpr (kWarpsPerM > 1) {
    __syncthreads();  // sRed still holds maxes that slower warps may be reading
    if (t == 0) {
      sRed[warp * 16 + g] = row_sum[0];
      sRed[warp * 16 + g + 8] = row_sum[1];
    }
    named_barrier(group_barrier, group_threads);
    row_sum[0] = row_sum[1] = 0.f;
#pragma unroll
    for (int w = 0; w < kWarpsPerM; ++w) {  // same order in every warp: identical totals
      const int ww = m_tile * kWarpsPerM + w;
      row_sum[0] += sRed[ww * 16 + g];
      row_sum[1] += sRed[ww * 16 + g + 8];
    }
  }

  // ---- normalize (null sink folded into the denominator) and store ----
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + q_idx * p.out_row_stride;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int head = head0 + m_tile * 16 + g + 8 * r;
    if (head >= p.h_q) continue;
    const sink::RowFinish f = sink::NullSink::finish(row_max[r], row_sum[r], sink::load_log2(p.attn_sink, head));
    __nv_bfloat16* orow = out + (int64_t)head * p.out_head_stride + dv0 + 2 * t;
#pragma unroll
    for (int i = 0; i < kOTiles; ++i)
      *reinterpret_cast<uint32_t*>(orow + i * 8) =
          pack_bf16x2(o[i][2 * r] * f.out_scale, o[i][2 * r + 1] * f.out_scale);
    if (part == 0 && t == 0) {
      const int64_t sh = q_idx * p.h_q + head;
      p.lse[sh] = f.lse;
      p.max_logits[sh] = f.max_logit;
    }
  }
}

}  // namespace sinkops::cuda::mla
