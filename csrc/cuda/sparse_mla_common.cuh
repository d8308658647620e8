// Device helpers of the sparse MLA prefill over bf16 KV: the shared-memory swizzle its
// ldmatrix reads assume, the zero-filling cp.async gather of one KV chunk, and the null-sink
// fold of the online softmax. (All inline PTX, mma/ldmatrix/cp.async included, is in mma_sm80.cuh.)
// Header-only, torch-free.
#pragma once
#include <cuda_bf16.h>
#include <cstdint>

#include "mma_sm80.cuh"

namespace sinkops::cuda::mla {

using namespace sinkops::cuda::ptx;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// ---- shared-memory swizzle -------------------------------------------------------------
// Rows of bf16 whose length is a multiple of 64 elements (eight 16-byte chunks) land on the
// same banks (512/576-element rows are multiples of 128 B), so eight ldmatrix row addresses
// at one column would hit one bank group 8 times. XOR-ing the low 3 bits of the chunk index
// with the row spreads any 8 consecutive rows over 8 distinct chunks: conflict-free
// ldmatrix, and cp.async still writes whole 16-byte chunks.
__device__ __forceinline__ int swizzled_chunk(int row, int chunk) {
  return chunk ^ (row & 7);
}
// Element offset of 16-byte chunk `chunk` of row `row` in a [rows][row_elems] bf16 tile.
__device__ __forceinline__ int swizzled_offset(int row, int chunk, int row_elems) {
  return row * row_elems + swizzled_chunk(row, chunk) * 8;
}

// ---- cp.async ----------------------------------------------------------------------------
// 16-byte global->shared copy; when `valid` is false nothing is read and the chunk is zero-filled
// (masked KV rows must be finite zeros: P = 0 times stale NaN bits would still be NaN).
__device__ __forceinline__ void cp_async_16_zfill(void* smem, const void* gmem, bool valid) {
  cp_async_16(smem_addr(smem), gmem, valid);
}

// ---- softmax finish with the null sink ---------------------------------------------------------
// Row state at the end of the online softmax, in log2 units: m = max_j x_j * log2(e)
// (-inf when the row saw no key), l = sum_j 2^(x_j log2 e - m).
struct RowFinish {
  float out_scale;   // multiply the un-normalized O by this
  float lse;         // natural log, sink excluded; +inf for empty rows
  float max_logit;   // natural units; -inf for empty rows
};

// The null sink is one more term in the denominator only: l + 2^(sink*log2e - m).
// sink = -inf adds exactly 0.0f, so 1/(l + 0) is bitwise 1/l (the no-op contract);
// sink = +inf gives 1/inf = 0, a zero row (O is finite). Empty rows: out 0, lse +inf.
__device__ __forceinline__ RowFinish finish_row(float m, float l, const float* attn_sink, int head) {
  RowFinish f;
  if (m == -INFINITY) {
    f.out_scale = 0.f;
    f.lse = INFINITY;
    f.max_logit = -INFINITY;
    return f;
  }
  float denom = l;
  if (attn_sink != nullptr) denom += exp2f(attn_sink[head] * kLog2e - m);
  f.out_scale = 1.f / denom;
  f.lse = (m + log2f(l)) * kLn2;
  f.max_logit = m * kLn2;
  return f;
}

}  // namespace sinkops::cuda::mla
