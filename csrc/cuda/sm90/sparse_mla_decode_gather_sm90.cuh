// The FP8 cache gather of the Hopper sparse MLA decode kernels (sparse_mla_decode_sm90.cuh: 64
// heads per CTA; sparse_mla_decode_narrow_sm90.cuh: up to 32): 128 threads gather the raw e4m3
// bytes, scales and bf16 RoPE of one 64-key block of a row's key list into registers (load), and
// later convert them into a bf16 tile of shared memory (store), the [64 keys, d_qk] K-major,
// 128-byte-swizzled layout of SparseMlaSm90Config::Tiles that the wgmmas read.
//
// Thread t owns 16-byte quarter t % 4 of each 64-byte e4m3 tile row (16 channels = bf16 chunks
// 2q and 2q+1 of the tile) of key rows t / 4 + 32 j (j < 2). Rows row0 + 32 j share row0's
// swizzle phase (it repeats every 8 rows) and tiles are 8-row multiples apart, so one swizzled
// address per chunk serves every row and tile of the thread.
#pragma once
#include "../fp8_dequant.cuh"
#include "sinkops/kv_cache_layout.h"
#include "sinkops/sparse_mla_params.h"
#include "sparse_mla_sm90_consumer.cuh"

namespace sinkops::cuda::sm90 {

// ---- register loads of the cache (read-only path, L1-allocating: a thread's tiles of one key
// share 128-byte lines; 256-byte L2 prefetch: a key row is 576-656 contiguous bytes) ------------
__device__ __forceinline__ uint4 ld_cache_16(const void* ptr, bool ok) {
  uint4 v = make_uint4(0, 0, 0, 0);
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %4, 0;\n"
      " @p ld.global.nc.L1::evict_last.L2::256B.v4.u32 {%0, %1, %2, %3}, [%5];\n}\n"
      : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w)
      : "r"(int(ok)), "l"(ptr));
  return v;
}
__device__ __forceinline__ uint2 ld_cache_8(const void* ptr, bool ok) {
  uint2 v = make_uint2(0, 0);
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n"
      " @p ld.global.nc.L1::evict_last.v2.u32 {%0, %1}, [%3];\n}\n"
      : "+r"(v.x), "+r"(v.y)
      : "r"(int(ok)), "l"(ptr));
  return v;
}

// Where a key row's bytes are; token == nullptr for an invalid key.
struct TokenRef {
  const uint8_t* token;
  const uint8_t* scales;  // v4: its 8 e8m0 bytes; v32: its 4 fp32 scales (inside the token)
};

template <KvCacheLayout L>
__device__ __forceinline__ TokenRef locate_token(const KvPool& pool, int idx) {
  using T = KvLayout<L>;
  const int bs = pool.block_size;
  if (idx < 0 || int64_t(idx) >= pool.num_blocks * bs) return {nullptr, nullptr};
  int64_t block, off;
  if ((bs & (bs - 1)) == 0) {  // page sizes are powers of two in practice: no division
    block = idx >> (__ffs(bs) - 1);
    off = idx & (bs - 1);
  } else {
    block = idx / bs;
    off = idx % bs;
  }
  const uint8_t* base = pool.cache + block * pool.block_stride;
  const uint8_t* token = base + off * T::kTokenStride;
  if constexpr (L == KvCacheLayout::kV4) return {token, base + T::scale_offset(bs, off)};
  else return {token, token + T::kScaleOffset};
}

// A 16-byte store to shared memory through a 32-bit shared-window address. The buffer pointers
// are generic (CuTe), and a generic-address store (ST.E) costs a 64-bit address and the generic
// path: 2 % at 128 heads (bench/NOTES.md, decode v6).
__device__ __forceinline__ void st_shared_16(const void* smem, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(cast_smem_ptr_to_uint(smem)), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}

// kRows: the key rows a thread gathers per block, row0 + 32 j for j < 2 (every key of the block), or
// 1 (a 2-CTA pair's half: row row0 + 32 half, `half` = the CTA's rank; the peer gathers the other).
template <KvCacheLayout L, int kRows = 2>
struct Fp8BlockGather {
  using T = KvLayout<L>;
  static constexpr int kDqk = T::kDqk;
  using Base = SparseMlaSm90Config<kDqk>;
  static constexpr int kTiles = Base::kTiles;
  static constexpr int kFp8Tiles = T::kNope / 64;  // 7 (v4), 8 (v32); the RoPE tile follows
  static_assert(T::kRope == 64 && T::kNope % 64 == 0 && kFp8Tiles + 1 == kTiles, "fp8 tiles, then one bf16 RoPE tile");
  static_assert(L == KvCacheLayout::kV4 ? T::kScaleGroup == 64 : T::kScaleGroup == 128, "one scale per 1 or 2 tiles");
  static constexpr bool kV4 = L == KvCacheLayout::kV4;

  // One key row's share of this thread, in registers between its load and its conversion.
  struct Staged {
    uint4 fp8[kFp8Tiles];  // 16 e4m3 bytes of each fp8 tile
    uint4 rope[2];         // 16 bf16 RoPE channels
    uint4 scales;          // v4: 8 e8m0 bytes in (x, y); v32: 4 fp32
    bool ok;               // a valid key (else everything above is zero)
  };

  static_assert(kRows == 1 || kRows == 2, "both rows of a thread, or one");
  const SparseMlaDecodeParams& p;
  int bi, si, key_begin, key_end;
  int quarter, row0;  // this thread: 16-byte quarter `quarter` of each tile's 64 e4m3 bytes, rows row0 + 32 j
  int half = 0;       // kRows == 1: this thread's row is row0 + 32 half
  bf16* chunk0;       // tile buffer, row row0, tile 0: output chunk 2 quarter (swizzled)
  bf16* chunk1;       // ... output chunk 2 quarter + 1

  // tiles: a [64 keys, d_qk] tile buffer (Base::Tiles<kTiles>); t: this thread's index in its 128.
  __device__ __forceinline__ Fp8BlockGather(const SparseMlaDecodeParams& params, int row, int begin, int end, bf16* tiles,
                                            int t)
      : p(params), bi(row / params.s_q), si(row % params.s_q), key_begin(begin), key_end(end), quarter(t % 4),
        row0(t / 4) {
    auto sKV = make_tensor(make_smem_ptr(tiles), typename Base::template Tiles<kTiles>{});
    chunk0 = &sKV(row0, quarter * 16);
    chunk1 = &sKV(row0, quarter * 16 + 8);
  }

  // The slot index of the key at position `pos` of the row's list, -1 when there is none.
  __device__ __forceinline__ int index_at(int pos) const {
    if (pos >= key_end) return -1;
    const bool main = pos < p.pool.topk;
    const KvPool& pool = main ? p.pool : p.extra;
    const int i = main ? pos : pos - p.pool.topk;
    const int len = pool.topk_length != nullptr ? pool.topk_length[bi] : pool.topk;
    return i < len ? pool.indices[bi * pool.indices_batch_stride + si * pool.indices_row_stride + i] : -1;
  }
  __device__ __forceinline__ int pos_of(int blk, int j) const { return key_begin + blk * 64 + row0 + 32 * j; }
  // The row (0 or 1: row0 + 32 r) that staged row j holds.
  __device__ __forceinline__ int row_of(int j) const { return kRows == 2 ? j : half; }
  // Both rows' indices (kRows == 1 too: the other row's validity is published here as well).
  __device__ __forceinline__ void load_indices(int (&idx)[2], int blk) const {
#pragma unroll
    for (int j = 0; j < 2; ++j) idx[j] = index_at(pos_of(blk, j));
  }
  // kRows == 1: whether the peer's row of block `blk` is a valid key.
  __device__ __forceinline__ bool other_row_ok(int blk, const int (&idx)[2]) const {
    const int r = half ^ 1, pos = pos_of(blk, r);  // (selects, not idx[r]: a runtime index puts idx in local memory)
    return locate_token<L>(pos < p.pool.topk ? p.pool : p.extra, r ? idx[1] : idx[0]).token != nullptr;
  }

  // Issues the register loads of block `blk` (indices idx): nothing is read for an invalid key.
  __device__ __forceinline__ void load(Staged (&s)[kRows], int blk, const int (&idx)[2]) const {
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int pos = pos_of(blk, row_of(j));
      const TokenRef ref = locate_token<L>(pos < p.pool.topk ? p.pool : p.extra, row_of(j) ? idx[1] : idx[0]);
      const bool ok = ref.token != nullptr;
      s[j].ok = ok;
#pragma unroll
      for (int c = 0; c < kFp8Tiles; ++c) s[j].fp8[c] = ld_cache_16(ref.token + c * 64 + quarter * 16, ok);
      const uint8_t* rope = ref.token + T::kRopeOffset + quarter * 32;
      s[j].rope[0] = ld_cache_16(rope, ok);
      s[j].rope[1] = ld_cache_16(rope + 16, ok);
      if constexpr (kV4) {
        const uint2 sc = ld_cache_8(ref.scales, ok);
        s[j].scales = make_uint4(sc.x, sc.y, 0, 0);
      } else {
        s[j].scales = ld_cache_16(ref.scales, ok);
      }
    }
  }

  // Converts the staged rows into the tile buffer `elem_off` elements past the constructor's and
  // publishes which keys are valid in valid[64]. v4: where every scale byte of the warp's rows is
  // <= 134 (scales up to 2^7: any cache quantized from bf16 activations below 57344), one bf16
  // multiply per pair instead of two (warp-uniform, outside the unrolled rows: a branch per tile
  // inside them cost 20 %, bench/NOTES.md "Decode v5"; V4-Pro at TP8 -5 %: "Decode v11b").
  __device__ __forceinline__ void store(const Staged (&s)[kRows], int elem_off, int32_t* valid) const {
    if constexpr (kV4) {
      bool small = true;
#pragma unroll
      for (int j = 0; j < kRows; ++j)  // bytes 0..6 are the 7 tiles' scales; byte 7 is padding
        small = small && __vcmpleu4(s[j].scales.x, 0x86868686u) == 0xFFFFFFFFu &&
                __vcmpleu4(s[j].scales.y & 0x00FFFFFFu, 0x86868686u) == 0xFFFFFFFFu;
      if (__all_sync(0xffffffffu, small)) {
        store_rows<true>(s, elem_off, valid);
        return;
      }
    }
    store_rows<false>(s, elem_off, valid);
  }

  template <bool kFolded>
  __device__ __forceinline__ void store_rows(const Staged (&s)[kRows], int elem_off, int32_t* valid) const {
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int off = elem_off + row_of(j) * 2048;
#pragma unroll
      for (int c = 0; c < kFp8Tiles; ++c) {
        const uint4 raw = s[j].fp8[c];
        uint4 lo, hi;
        if constexpr (kV4) {
          const uint32_t word = c < 4 ? s[j].scales.x : s[j].scales.y;
          const uint32_t byte = (word >> (8 * (c % 4))) & 0xFFu;
          const uint32_t scale = kFolded ? e8m0_times_2pow120_bf16x2(byte) : e8m0_to_bf16x2(byte);
          lo = dequant_8_e4m3_pow2<kFolded>(make_uint2(raw.x, raw.y), scale);
          hi = dequant_8_e4m3_pow2<kFolded>(make_uint2(raw.z, raw.w), scale);
        } else {
          const uint32_t words[4] = {s[j].scales.x, s[j].scales.y, s[j].scales.z, s[j].scales.w};
          const float scale = __uint_as_float(words[c / 2]);
          lo = dequant_8_e4m3(make_uint2(raw.x, raw.y), scale);
          hi = dequant_8_e4m3(make_uint2(raw.z, raw.w), scale);
        }
        st_shared_16(chunk0 + off + c * 4096, lo);
        st_shared_16(chunk1 + off + c * 4096, hi);
      }
      st_shared_16(chunk0 + off + kFp8Tiles * 4096, s[j].rope[0]);
      st_shared_16(chunk1 + off + kFp8Tiles * 4096, s[j].rope[1]);
      if (quarter == 0) valid[row0 + 32 * row_of(j)] = s[j].ok;
    }
  }
};

}  // namespace sinkops::cuda::sm90
