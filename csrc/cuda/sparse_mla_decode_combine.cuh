// The combine of a split sparse MLA decode (every kernel family): merges each (row, head)'s split
// partials (the workspace of sparse_mla_decode_plan.cuh) and applies the sink once
// (sink_policy.cuh). Its grid (CombineLaunch) is the host's one decision here:
//
// * Where the main kernel leaves SMs idle, the combine is launched as a programmatic dependent
//   (kernel_launch.cuh): its CTAs wait there, resident, for the partials, which hides its launch
//   gap. That only pays when its grid fits those SMs (at most 2 CTAs each: a larger grid piles onto
//   them before the main kernel's SMs free up, +1.1 us at batch 16; bench/NOTES.md decode v6), so a
//   CTA takes as many heads of a row as needed to fit (up to kCombineMaxHeads).
// * Otherwise one CTA per (row, head), plain launch.
//
// Per CTA (one row, heads h0 .. h0 + n - 1): (1) the n x splits (max, sum) pairs into shared
// memory, one load each; (2) one thread per head: the global max, each split's weight
// exp2(max_s - max), the sink's finish, lse; (3) every (head, 4-column chunk) of the output:
// sum over splits of weight x partial in split order, skipping weight-0 splits (empty ones),
// kCombineChunksInFlight chunks per thread at a time, their loads issued together.
// Included by sparse_mla_decode.cu alone (it defines the kernel).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>

#include "kernel_launch.cuh"
#include "mma_sm80.cuh"
#include "sink_policy.cuh"
#include "sinkops/sparse_mla_params.h"
#include "sparse_mla_decode_plan.cuh"

namespace sinkops::cuda::sparse_mla_decode {

constexpr int kCombineChunks = kPartialDv / 4;  // 4-channel chunks of an output row: 128
constexpr int kCombineMaxThreads = 512;
constexpr int kCombineMaxHeads = 16;          // heads one CTA merges
constexpr int kCombineChunksInFlight = 4;     // chunks per thread per pass

// The combine's grid and launch for a call (grid (ceil(h_q / heads_per_cta), b * s_q)).
struct CombineLaunch {
  int heads_per_cta;
  int threads;     // 128 per head, at most kCombineMaxThreads
  bool dependent;  // a programmatic dependent of the main kernel
};

// The combine kernel's dynamic shared memory for `splits`: (max, sum) per (head, split), then the
// weights, then each head's out_scale.
__host__ __device__ inline int combine_smem_bytes(int heads_per_cta, int splits) {
  return heads_per_cta * splits * int(sizeof(float2) + sizeof(float)) + heads_per_cta * int(sizeof(float));
}

// grid (ceil(h_q / heads_per_cta), b * s_q); block: min(128 x heads_per_cta, 512) threads;
// dynamic smem: combine_smem_bytes(heads_per_cta, num_splits).
__global__ void __launch_bounds__(kCombineMaxThreads)
    sparse_mla_decode_combine_kernel(const __grid_constant__ SparseMlaDecodeParams p, int heads_per_cta) {
  wait_for_prerequisite();  // launched as a dependent of the main kernel: its partials must be complete
  SINKOPS_DYNAMIC_SMEM(smem_raw, 16);
  const int splits = p.num_splits;
  const int row = blockIdx.y, h0 = blockIdx.x * heads_per_cta;
  const int n = min(heads_per_cta, p.h_q - h0);  // this CTA's heads
  const int bi = row / p.s_q, si = row % p.s_q;
  const int t = threadIdx.x, threads = blockDim.x;
  const float* ws_o = static_cast<const float*>(p.workspace);  // [rows][splits][h_q][512]
  const float2* ws_ml = reinterpret_cast<const float2*>(ws_o + partial_o_elems(p, splits));  // [rows][splits][h_q]
  const int64_t part_row = int64_t(row) * splits * p.h_q + h0;  // partial of (split, h0 + j): + split * h_q + j
  float2* ml = reinterpret_cast<float2*>(smem_raw);  // [n heads][splits]
  float* weight = reinterpret_cast<float*>(ml + heads_per_cta * splits);  // [n heads][splits]
  float* out_scale = weight + heads_per_cta * splits;                     // [n heads]

  for (int i = t; i < n * splits; i += threads) {
    const int j = i / splits, sp = i % splits;
    ml[i] = ws_ml[part_row + int64_t(sp) * p.h_q + j];
  }
  __syncthreads();
  for (int j = t; j < n; j += threads) {
    const float2* m = ml + j * splits;
    float m_all = -INFINITY;
    for (int sp = 0; sp < splits; ++sp) m_all = fmaxf(m_all, m[sp].x);
    float sum = 0.f;
    for (int sp = 0; sp < splits; ++sp) {
      // an empty split has max -inf: weight 0 (and every weight is 0 when the row saw no key)
      const float w = m_all == -INFINITY ? 0.f : exp2f(m[sp].x - m_all);
      weight[j * splits + sp] = w;
      sum += m[sp].y * w;
    }
    const sink::RowFinish f = sink::NullSink::finish(m_all, sum, sink::load_log2(p.attn_sink, h0 + j));
    out_scale[j] = f.out_scale;
    p.lse[(int64_t(bi) * p.h_q + h0 + j) * p.s_q + si] = f.lse;
  }
  __syncthreads();
  // [n heads][128 chunks] of 4 bf16: this CTA's output rows
  auto* out_chunks = reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(p.out) + (int64_t(row) * p.h_q + h0) * kPartialDv);
  const int chunks = n * kCombineChunks;
  const int64_t split_stride = int64_t(p.h_q) * kPartialDv;  // floats between one split's partial and the next's
  for (int base = 0; base < chunks; base += kCombineChunksInFlight * threads) {
    // This pass's chunks (a thread past the CTA's last one loads and stores nothing; the loads are
    // predicated, not branched around, so a split's are all in flight at once).
    const float* part[kCombineChunksInFlight];  // [splits][h_q][512] f32 at the chunk's (head, column)
    const float* w[kCombineChunksInFlight];     // [splits] the chunk's head's weights
    bool live[kCombineChunksInFlight];
    float4 acc[kCombineChunksInFlight];
#pragma unroll
    for (int k = 0; k < kCombineChunksInFlight; ++k) {
      const int c = base + k * threads + t;
      live[k] = c < chunks;
      const int j = live[k] ? c / kCombineChunks : 0;
      part[k] = ws_o + (part_row + j) * kPartialDv + c % kCombineChunks * 4;
      w[k] = weight + j * splits;
      acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    for (int sp = 0; sp < splits; ++sp) {
      float4 v[kCombineChunksInFlight];
#pragma unroll
      for (int k = 0; k < kCombineChunksInFlight; ++k)
        if (live[k]) v[k] = *reinterpret_cast<const float4*>(part[k] + sp * split_stride);
#pragma unroll
      for (int k = 0; k < kCombineChunksInFlight; ++k) {
        const float ws = w[k][sp];
        // an empty split (or a row that saw no key) adds nothing, whatever its partial holds
        if (!live[k] || ws == 0.f) continue;
        acc[k].x += v[k].x * ws;
        acc[k].y += v[k].y * ws;
        acc[k].z += v[k].z * ws;
        acc[k].w += v[k].w * ws;
      }
    }
#pragma unroll
    for (int k = 0; k < kCombineChunksInFlight; ++k) {
      if (!live[k]) continue;
      const int c = base + k * threads + t;
      const float s = out_scale[c / kCombineChunks];
      out_chunks[c] = make_uint2(ptx::pack_bf16x2(acc[k].x * s, acc[k].y * s), ptx::pack_bf16x2(acc[k].z * s, acc[k].w * s));
    }
  }
}

}  // namespace sinkops::cuda::sparse_mla_decode
