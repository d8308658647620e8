// Whole K/V tiles loaded by the tensor memory accelerator (TMA) in the sm_90a window kernels: the
// host side (one tensor map per tensor, made per launch) and the device side (one thread issues a
// tile's loads; the tile's `ready` mbarrier counts the bytes).
//
// Why (bench/NOTES.md "Window v9"): without producer warps every consumer thread copied a share of
// each tile by cp.async (~7 instructions a 16-byte chunk, ~13 % of the wide kernel's instructions at
// d 128, all on the consumers' dependency chains). A TMA load is one instruction per column atom.
//
// Which tiles: only tiles that lie wholly inside their segment. A tile that crosses the segment's
// end keeps the per-thread cp.async copy, which zero-fills the rows past the end: those rows may be
// another segment's or trailing padding (uninitialized, possibly NaN), and a masked key still
// multiplies its V row by P = 0 in the PV MMA (0 x NaN = NaN). Columns past d / d_v are zero-filled
// by the TMA itself (the maps' first dimension is d / d_v, the boxes the padded atom width).
#pragma once
#include <cuda.h>  // CUtensorMap, its enums, cuTensorMapEncodeTiled's type (the function comes from the runtime)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>

#include "sinkops/types.h"  // DType
#include "wgmma.cuh"        // Barrier

namespace sinkops::cuda::sm90 {

// The K-major swizzle atom of a padded head dim (KMajorRows): the widest of 64 / 32 / 16 elements
// that divides it (128-, 64- or 32-byte rows); a tile is its column atoms one after another, each
// [rows, atom] with the atom's swizzle.
constexpr int k_major_atom_width(int head_dim) { return head_dim % 64 == 0 ? 64 : head_dim % 32 == 0 ? 32 : 16; }

// One 3-D map per tensor over [total_k rows, h_k heads, d (or d_v) columns]; a box is one column
// atom of one head for kRows rows. ok == 0: no maps (a stride or address TMA cannot take, or no
// driver entry point): the kernels then copy every tile with cp.async.
struct KvTileMaps {
  CUtensorMap k, v;  // 64-byte aligned (CUtensorMap is)
  int ok;
};

// ---- host ----

using TensorMapEncoder = decltype(&cuTensorMapEncodeTiled);  // (no link to libcuda: the driver entry point)

inline TensorMapEncoder tensor_map_encoder() {
  static const TensorMapEncoder encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      fn = nullptr;
    }
    return reinterpret_cast<TensorMapEncoder>(fn);
  }();
  return encode;
}

// The map of one [rows, heads, cols] tensor (16-bit elements, strides in elements) with boxes of
// (atom columns, 1 head, box_rows rows) in the atom's swizzle; false where TMA cannot express it.
inline bool encode_kv_map(CUtensorMap& map, bool bf16, const void* base, int64_t rows, int heads, int cols,
                          int64_t row_stride, int64_t head_stride, int atom, int box_rows) {
  const TensorMapEncoder encode = tensor_map_encoder();
  if (encode == nullptr || base == nullptr || rows < 1 || heads < 1 || cols < 1) return false;
  if (heads == 1) head_stride = row_stride;  // (never stepped; TMA wants a multiple of 16 bytes)
  const cuuint64_t dims[3] = {cuuint64_t(cols), cuuint64_t(heads), cuuint64_t(rows)};
  const cuuint64_t strides[2] = {cuuint64_t(head_stride) * 2, cuuint64_t(row_stride) * 2};  // bytes
  const cuuint32_t box[3] = {cuuint32_t(atom), 1, cuuint32_t(box_rows)};
  const cuuint32_t unit[3] = {1, 1, 1};
  const CUtensorMapSwizzle swizzle =
      atom == 64 ? CU_TENSOR_MAP_SWIZZLE_128B : atom == 32 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_32B;
  return encode(&map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3,
                const_cast<void*>(base), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// K and V maps for tiles of kRows keys at padded head dim kHeadDim. Params: the forward's or the
// backward's (the same k / v fields). SINKOPS_WA90_TMA=0 turns them off (A/B runs, tests).
template <int kHeadDim, int kRows, class Params>
KvTileMaps make_kv_tile_maps(const Params& p) {
  const char* env = std::getenv("SINKOPS_WA90_TMA");
  const bool enabled = env == nullptr || *env != '0';
  KvTileMaps maps{};
  constexpr int atom = k_major_atom_width(kHeadDim);
  const bool bf16 = p.dtype == DType::kBFloat16;
  maps.ok = enabled &&
            encode_kv_map(maps.k, bf16, p.k, p.total_k, p.h_k, p.d, p.k_row_stride, p.k_head_stride, atom, kRows) &&
            encode_kv_map(maps.v, bf16, p.v, p.total_k, p.h_k, p.d_v, p.v_row_stride, p.v_head_stride, atom, kRows);
  return maps;
}

// ---- device ----

// The barrier expects `bytes` more before its phase completes (it still needs its arrivals).
__device__ __forceinline__ void expect_tx(Barrier& bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(cast_smem_ptr_to_uint(&bar)),
               "r"(bytes)
               : "memory");
}

// One box of a 3-D map at coordinates (col, head, row) into shared memory; completes its bytes on bar.
__device__ __forceinline__ void tma_load_3d(uint32_t smem_dst, const CUtensorMap& map, Barrier& bar, int col,
                                            int head, int row) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(smem_dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(col), "r"(head), "r"(row), "r"(cast_smem_ptr_to_uint(&bar))
      : "memory");
}

// A whole tile of kRows keys (packed rows row.., kv head hk) of K and V into the stages at k_dst /
// v_dst, column atom by column atom; the caller's thread then arrives on `ready` like every other.
template <int kHeadDim, int kRows>
__device__ __forceinline__ void tma_kv_tile(const KvTileMaps& maps, Barrier& ready, uint32_t k_dst, uint32_t v_dst,
                                            int row, int hk) {
  constexpr int kAtom = k_major_atom_width(kHeadDim);
  constexpr uint32_t kAtomBytes = kRows * kAtom * 2;
  expect_tx(ready, 2 * kAtomBytes * (kHeadDim / kAtom));
#pragma unroll
  for (int a = 0; a < kHeadDim / kAtom; ++a) {
    tma_load_3d(k_dst + a * kAtomBytes, maps.k, ready, a * kAtom, hk, row);
    tma_load_3d(v_dst + a * kAtomBytes, maps.v, ready, a * kAtom, hk, row);
  }
}

}  // namespace sinkops::cuda::sm90
