// Device helpers of the sparse MLA prefill over bf16 KV: the shared-memory swizzle its
// ldmatrix reads assume and the zero-filling cp.async gather of one KV chunk. (All inline PTX,
// mma/ldmatrix/cp.async included, is in mma_sm80.cuh; the sink fold is sink_policy.cuh.)
// Header-only, torch-free.
#pragma once
#include <cuda_bf16.h>
#include <cstdint>

#include "mma_sm80.cuh"

namespace sinkops::cuda::mla {

using namespace sinkops::cuda::ptx;

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

}  // namespace sinkops::cuda::mla
