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

// One outer dimension of a map: its size, its stride in elements, the box's extent along it.
struct MapDim {
  int64_t size, stride;
  int box;
};

// The map of a (1 + kOuter)-D view of 16-bit elements: `cols` contiguous columns, then the outer
// dimensions, with boxes of (atom columns, each outer box) in the atom's swizzle; false where TMA
// cannot express it.
template <int kOuter>
inline bool encode_tile_map(CUtensorMap& map, bool bf16, const void* base, int cols, const MapDim (&outer)[kOuter],
                            int atom) {
  static_assert(kOuter >= 1 && kOuter <= 4, "TMA maps have at most 5 dimensions");
  const TensorMapEncoder encode = tensor_map_encoder();
  if (encode == nullptr || base == nullptr || cols < 1) return false;
  cuuint64_t dims[1 + kOuter] = {cuuint64_t(cols)}, strides[kOuter];  // strides in bytes
  cuuint32_t box[1 + kOuter] = {cuuint32_t(atom)}, unit[1 + kOuter];
  int64_t stepped = cols;  // a size-1 dimension is never stepped, but TMA wants a multiple of 16 bytes
  for (int i = kOuter - 1; i >= 0; --i)
    if (outer[i].size > 1) stepped = outer[i].stride;
  for (int i = 0; i < kOuter; ++i) {
    if (outer[i].size < 1) return false;
    dims[1 + i] = cuuint64_t(outer[i].size);
    strides[i] = cuuint64_t(outer[i].size == 1 ? stepped : outer[i].stride) * 2;
    box[1 + i] = cuuint32_t(outer[i].box);
  }
  for (cuuint32_t& u : unit) u = 1;
  const CUtensorMapSwizzle swizzle =
      atom == 64 ? CU_TENSOR_MAP_SWIZZLE_128B : atom == 32 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_32B;
  return encode(&map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 1 + kOuter,
                const_cast<void*>(base), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The 3-D form: outer dimensions a (inner) and b.
inline bool encode_tile_map(CUtensorMap& map, bool bf16, const void* base, int cols, MapDim a, MapDim b, int atom) {
  const MapDim outer[2] = {a, b};
  return encode_tile_map(map, bf16, base, cols, outer, atom);
}

// SINKOPS_WA90_TMA=0 turns every map off (A/B runs, tests): the window kernels then copy with
// cp.async, the sparse MLA prefill loads Q by cp.async and stores through its threads.
inline bool tma_enabled() {
  const char* env = std::getenv("SINKOPS_WA90_TMA");
  return env == nullptr || *env != '0';
}

// K and V maps for tiles of kRows keys of one kv head at padded head dim kHeadDim: boxes of
// (atom, 1 head, kRows rows). Params: the forward's or the backward's (the same k / v fields).
// Encoding costs 0.09 µs a map on the H200's host (tools/prof/tensor_map_cost.cu): made per launch.
template <int kHeadDim, int kRows, class Params>
KvTileMaps make_kv_tile_maps(const Params& p) {
  KvTileMaps maps{};
  constexpr int atom = k_major_atom_width(kHeadDim);
  const bool bf16 = p.dtype == DType::kBFloat16;
  maps.ok = tma_enabled() &&
            encode_tile_map(maps.k, bf16, p.k, p.d, {p.h_k, p.k_head_stride, 1}, {p.total_k, p.k_row_stride, kRows},
                            atom) &&
            encode_tile_map(maps.v, bf16, p.v, p.d_v, {p.h_k, p.v_head_stride, 1}, {p.total_k, p.v_row_stride, kRows},
                            atom);
  return maps;
}

// Maps over [total_q, h_q, cols] tensors for blocks of 64 rows = hc heads x pw positions,
// head-major (row r: head r / pw, position r % pw): boxes of (atom, pw positions, hc heads). Q's
// and one more such tensor's (`second`, `cols` columns, the given strides); false where TMA cannot
// take them (rows past 2^31: its coordinates are 32-bit).
template <int kHeadDim, class Params>
bool encode_row_block_maps(CUtensorMap& q, CUtensorMap& second, const Params& p, const void* second_base, int cols,
                           int64_t row_stride, int64_t head_stride, int pw, int hc) {
  constexpr int atom = k_major_atom_width(kHeadDim);
  const bool bf16 = p.dtype == DType::kBFloat16;
  return tma_enabled() && p.total_q < (int64_t(1) << 31) &&
         encode_tile_map(q, bf16, p.q, p.d, {p.total_q, p.q_row_stride, pw}, {p.h_q, p.q_head_stride, hc}, atom) &&
         encode_tile_map(second, bf16, second_base, cols, {p.total_q, row_stride, pw}, {p.h_q, head_stride, hc}, atom);
}

// Q and dO maps of the backward's dk/dv kernel.
struct RowBlockMaps {
  CUtensorMap q, dout;
  int ok;
};

template <int kHeadDim, class Params>
RowBlockMaps make_row_block_maps(const Params& p, int pw, int hc) {
  RowBlockMaps maps{};
  maps.ok = encode_row_block_maps<kHeadDim>(maps.q, maps.dout, p, p.dout, p.d_v, p.dout_row_stride,
                                            p.dout_head_stride, pw, hc);
  return maps;
}

// Q and output maps of the forward window kernels (window_attention_sm90_rows.cuh). ok == 0: the
// kernels gather Q by cp.async and store through their threads (bench/NOTES.md "Window v12").
struct QOutMaps {
  CUtensorMap q, out;
  int ok;
};

template <int kHeadDim, class Params>
QOutMaps make_q_out_maps(const Params& p, int pw, int hc) {
  QOutMaps maps{};
  maps.ok = encode_row_block_maps<kHeadDim>(maps.q, maps.out, p, p.out, p.d_v, p.out_row_stride, p.out_head_stride,
                                            pw, hc);
  return maps;
}

// ---- device ----

// The barrier expects `bytes` more before its phase completes (it still needs its arrivals).
__device__ __forceinline__ void expect_tx(Barrier& bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(cast_smem_ptr_to_uint(&bar)),
               "r"(bytes)
               : "memory");
}

// One box of a 3-D map at coordinates (col, c1, c2) into shared memory; completes its bytes on bar.
__device__ __forceinline__ void tma_load_3d(uint32_t smem_dst, const CUtensorMap& map, Barrier& bar, int col, int c1,
                                            int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(smem_dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(col), "r"(c1), "r"(c2), "r"(cast_smem_ptr_to_uint(&bar))
      : "memory");
}

// An L2 policy for data read or written once: its lines are the first to go (createpolicy).
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// tma_load_3d with an L2 cache policy (l2_evict_first_policy) on the global reads.
__device__ __forceinline__ void tma_load_3d(uint32_t smem_dst, const CUtensorMap& map, Barrier& bar, int col, int c1,
                                            int c2, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(smem_dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(col), "r"(c1), "r"(c2), "r"(cast_smem_ptr_to_uint(&bar)), "l"(policy)
      : "memory");
}

// One box of a 4-D map at coordinates (col, c1, c2, c3), with an L2 cache policy; completes its
// bytes on bar.
__device__ __forceinline__ void tma_load_4d(uint32_t smem_dst, const CUtensorMap& map, Barrier& bar, int col, int c1,
                                            int c2, int c3, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n" ::"r"(smem_dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(col), "r"(c1), "r"(c2), "r"(c3), "r"(cast_smem_ptr_to_uint(&bar)),
      "l"(policy)
      : "memory");
}

// One box of shared memory at smem_src to a 3-D map at (col, c1, c2), with an L2 cache policy; the
// caller commits the bulk group and waits for its reads before the shared memory is reused.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap& map, uint32_t smem_src, int col, int c1, int c2,
                                             uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group.L2::cache_hint [%0, {%2, %3, %4}], [%1], %5;\n" ::"l"(
          reinterpret_cast<uint64_t>(&map)),
      "r"(smem_src), "r"(col), "r"(c1), "r"(c2), "l"(policy)
      : "memory");
}

// This thread's arrival on the barrier, which then also expects `bytes` before its phase completes.
__device__ __forceinline__ void arrive_expect_tx(Barrier& bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(cast_smem_ptr_to_uint(&bar)),
               "r"(bytes)
               : "memory");
}

// Bytes of a pair of tiles of kRows rows at padded head dim kHeadDim (what the barrier expects).
template <int kHeadDim, int kRows>
constexpr uint32_t kTilePairBytes = 2 * kRows * kHeadDim * 2;

// A pair of tiles of kRows rows (maps a and b at outer coordinates c1, c2) into a_dst / b_dst,
// column atom by column atom (each [kRows, atom], as KMajorRows lays them out); completes on bar.
template <int kHeadDim, int kRows>
__device__ __forceinline__ void tma_tile_pair(const CUtensorMap& a, const CUtensorMap& b, Barrier& bar, uint32_t a_dst,
                                              uint32_t b_dst, int c1, int c2) {
  constexpr int kAtom = k_major_atom_width(kHeadDim);
  constexpr uint32_t kAtomBytes = kRows * kAtom * 2;
#pragma unroll
  for (int i = 0; i < kHeadDim / kAtom; ++i) {
    tma_load_3d(a_dst + i * kAtomBytes, a, bar, i * kAtom, c1, c2);
    tma_load_3d(b_dst + i * kAtomBytes, b, bar, i * kAtom, c1, c2);
  }
}

// A whole block of 64 rows (positions row.., heads head..) of Q and dO into q_dst / o_dst; the
// calling thread's arrival (count 1) and the bytes complete `bar`.
template <int kHeadDim>
__device__ __forceinline__ void tma_row_block_pair(const RowBlockMaps& maps, Barrier& bar, uint32_t q_dst,
                                                   uint32_t o_dst, int row, int head) {
  arrive_expect_tx(bar, kTilePairBytes<kHeadDim, 64>);
  tma_tile_pair<kHeadDim, 64>(maps.q, maps.dout, bar, q_dst, o_dst, row, head);
}

// A whole tile of kRows keys (packed rows row.., kv head hk) of K and V into the stages at k_dst /
// v_dst; the caller's thread then arrives on `ready` like every other.
template <int kHeadDim, int kRows>
__device__ __forceinline__ void tma_kv_tile(const KvTileMaps& maps, Barrier& ready, uint32_t k_dst, uint32_t v_dst,
                                            int row, int hk) {
  expect_tx(ready, kTilePairBytes<kHeadDim, kRows>);
  tma_tile_pair<kHeadDim, kRows>(maps.k, maps.v, ready, k_dst, v_dst, hk, row);
}

}  // namespace sinkops::cuda::sm90
