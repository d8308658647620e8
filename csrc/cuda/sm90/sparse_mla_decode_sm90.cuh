// Sparse MLA decode over the paged FP8 KV caches on Hopper (sm_90a), DESIGN.md §2.3.
//
// The CTA layout and the two consumer warpgroups are sparse_mla_sm90_consumer.cuh's (one query
// row x 64 heads, steps of two 64-key blocks, wgmma QK and PV); this file has the FP8 producer and
// the decode epilogue. One CTA = one (batch, s_q) row x 64 heads x a split: a contiguous range of
// 128-key steps of the row's key list (the main pool's top-k, then the extra pool's, one softmax).
//
// Producer (WG2, 128 threads): per step it fills the 4 regions in the consumers' order (0L, 1R,
// 0R, 1L). Thread t owns 16-byte quarter t % 4 of each 64-byte e4m3 tile row (16 channels = bf16
// output chunks 2q and 2q+1 of the tile) of key rows t / 4 + 32 j (j < 2). The raw e4m3 bytes are
// gathered with cp.async into output chunk 2q itself and the region's scales into chunk 2q+1 of
// its first tile, so each thread later converts in place what it copied (no staging memory: Q,
// two bf16 key blocks and P fill shared memory); the bf16 RoPE chunks are copied to their places.
// A region is issued before the previous one is converted (see run() for the order). The
// conversions: fp8_dequant.cuh. Invalid keys copy nothing: zero bytes and zero scales dequantize
// to zero rows (masked anyway).
//
// Epilogue: with one split the null sink is folded here (sink_policy.cuh) and lse written; with
// several the unnormalized partials go to the workspace (sparse_mla_decode_plan.cuh) and the
// combine kernel (sparse_mla_decode.cu) applies the sink once.
#pragma once
#include "../fp8_dequant.cuh"
#include "../kernel_launch.cuh"
#include "../sparse_mla_decode_plan.cuh"
#include "sinkops/kv_cache_layout.h"
#include "sparse_mla_sm90_consumer.cuh"

namespace sinkops::cuda::sm90 {

constexpr int kDecodeStepKeys = 128;    // one step = two 64-key blocks; the plan's tile
// setmaxnreg split of the 64K registers: the consumers need ~200 (their code is the prefill's).
#ifndef SINKOPS_DECODE_PRODUCER_REGS
#define SINKOPS_DECODE_PRODUCER_REGS 104
#endif
constexpr int kDecodeProducerRegs = SINKOPS_DECODE_PRODUCER_REGS;
constexpr int kDecodeConsumerRegs = (65536 / 128 - kDecodeProducerRegs) / 2 / 8 * 8;
static_assert(2 * 128 * kDecodeConsumerRegs + 128 * kDecodeProducerRegs <= 65536 && kDecodeConsumerRegs >= 200, "registers");

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

template <KvCacheLayout L>
struct DecodeProducer {
  using T = KvLayout<L>;
  static constexpr int kDqk = T::kDqk;
  using C = SparseMlaSm90Config<kDqk>;
  static constexpr int kTiles = C::kTiles, kLeft = C::kLeftTiles;
  static constexpr int kFp8Tiles = T::kNope / 64;  // 7 (v4), 8 (v32); the RoPE tile follows
  static_assert(T::kRope == 64 && T::kNope % 64 == 0 && kFp8Tiles + 1 == kTiles, "fp8 tiles, then one bf16 RoPE tile");
  static_assert(L == KvCacheLayout::kV4 ? T::kScaleGroup == 64 : T::kScaleGroup == 128, "one scale per 1 or 2 tiles");
  static constexpr bool kV4 = L == KvCacheLayout::kV4;
  static constexpr int kScaleCopy = kV4 ? 4 : 8;  // scale bytes of one region's tiles (e8m0 x 4 / fp32 x 2)
  // Regions in the consumers' order: buffer 0 L, buffer 1 R, buffer 0 R, buffer 1 L.
  static constexpr int region_buf(int r) { return r & 1; }
  static constexpr bool region_right(int r) { return r == 1 || r == 2; }
  static constexpr int tile0(bool right) { return right ? kLeft : 0; }
  static constexpr int fp8_tiles(bool right) { return right ? kFp8Tiles - kLeft : kLeft; }

  const SparseMlaDecodeParams& p;
  typename C::Smem& sm;
  int bi, si, key_begin, key_end;
  int quarter, row0;  // this thread: 16-byte quarter `quarter` of each tile's 64 e4m3 bytes, rows row0 + 32 j
  bf16* chunk0;       // buffer 0, row row0, tile 0: output chunk 2 quarter (swizzled); the raw bytes land here
  bf16* chunk1;       // ... output chunk 2 quarter + 1; the region's scales land in tile0's

  // The slot index of the key at position `pos` of the row's list, -1 when there is none.
  __device__ __forceinline__ int index_at(int pos) const {
    if (pos >= key_end) return -1;
    const bool main = pos < p.pool.topk;
    const KvPool& pool = main ? p.pool : p.extra;
    const int i = main ? pos : pos - p.pool.topk;
    const int len = pool.topk_length != nullptr ? pool.topk_length[bi] : pool.topk;
    return i < len ? pool.indices[bi * pool.indices_batch_stride + si * pool.indices_row_stride + i] : -1;
  }
  __device__ __forceinline__ TokenRef token_at(int pos, int idx) const {
    return locate_token<L>(pos < p.pool.topk ? p.pool : p.extra, idx);
  }
  __device__ __forceinline__ int pos_of(int step, int buf, int j) const {
    return key_begin + (2 * step + buf) * 64 + row0 + 32 * j;
  }
  __device__ __forceinline__ void load_indices(int (&idx)[2][2], int step) const {
#pragma unroll
    for (int b = 0; b < 2; ++b)
#pragma unroll
      for (int j = 0; j < 2; ++j) idx[b][j] = index_at(pos_of(step, b, j));
  }

  // Issues the copies of region r of `step` once its consumer freed it: per row, this thread's 16
  // e4m3 bytes of every fp8 tile into output chunk 2 quarter of that tile, the region's scales into
  // output chunk 2 quarter + 1 of its first tile (both free until this thread converts them), and
  // in region R the thread's two 16-byte chunks of bf16 RoPE straight to their places. Invalid
  // keys zero-fill (nothing is read). One commit group per region.
  template <int r>
  __device__ __forceinline__ void issue(int step, const int (&idx)[2][2]) const {
    constexpr int buf = region_buf(r);
    constexpr bool right = region_right(r);
    sm.empty[buf][right ? 1 : 0].wait((step & 1) ^ 1);  // the first wait on each empty barrier passes
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const TokenRef ref = token_at(pos_of(step, buf, j), idx[buf][j]);
      const bool ok = ref.token != nullptr;
      const uint8_t* token = ok ? ref.token : p.pool.cache;
      const int64_t off = buf * (64 * kDqk) + j * 2048;
#pragma unroll
      for (int c = 0; c < fp8_tiles(right); ++c) {
        const int tile = tile0(right) + c;
        cp_async_16_zfill_l2(chunk0 + off + tile * 4096, token + tile * 64 + quarter * 16, ok);
      }
      const uint8_t* scales = ok ? ref.scales + (right ? kScaleCopy : 0) : p.pool.cache;
      cp_async_ca_zfill<kScaleCopy>(chunk1 + off + tile0(right) * 4096, scales, ok);
      if constexpr (right) {
        const uint8_t* rope = token + T::kRopeOffset + quarter * 32;
        cp_async_16_zfill_l2(chunk0 + off + kFp8Tiles * 4096, rope, ok);
        cp_async_16_zfill_l2(chunk1 + off + kFp8Tiles * 4096, rope + 16, ok);
      }
    }
    cp_async_commit();
  }

  // Region r's raw bytes (landed: the caller waited for its group) -> bf16 in place, then the
  // fence for the consumers' wgmma reads and the ready arrival.
  template <int r>
  __device__ __forceinline__ void convert() const {
    constexpr int buf = region_buf(r);
    constexpr bool right = region_right(r);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int64_t off = buf * (64 * kDqk) + j * 2048;
      const uint2 sc = kV4 ? make_uint2(*reinterpret_cast<const uint32_t*>(chunk1 + off + tile0(right) * 4096), 0)
                           : *reinterpret_cast<const uint2*>(chunk1 + off + tile0(right) * 4096);
#pragma unroll
      for (int c = 0; c < fp8_tiles(right); ++c) {
        const int tile = tile0(right) + c;
        const uint4 raw = *reinterpret_cast<const uint4*>(chunk0 + off + tile * 4096);
        uint4 lo, hi;
        if constexpr (kV4) {
          const uint32_t scale = e8m0_to_bf16x2((sc.x >> (8 * c)) & 0xFFu);
          lo = dequant_8_e4m3_pow2(make_uint2(raw.x, raw.y), scale);
          hi = dequant_8_e4m3_pow2(make_uint2(raw.z, raw.w), scale);
        } else {
          const float scale = __uint_as_float(c < 2 ? sc.x : sc.y);
          lo = dequant_8_e4m3(make_uint2(raw.x, raw.y), scale);
          hi = dequant_8_e4m3(make_uint2(raw.z, raw.w), scale);
        }
        *reinterpret_cast<uint4*>(chunk0 + off + tile * 4096) = lo;
        *reinterpret_cast<uint4*>(chunk1 + off + tile * 4096) = hi;
      }
    }
    cutlass::arch::fence_view_async_shared();  // generic-proxy stores (and the RoPE copies) -> wgmma reads
    sm.ready[buf][right ? 1 : 0].arrive();
  }

  // The consumer masked this buffer's previous block before freeing its first region.
  __device__ __forceinline__ void publish_valid(int step, int buf, const int (&idx)[2][2]) const {
    if (quarter != 0) return;
#pragma unroll
    for (int j = 0; j < 2; ++j)
      sm.valid[buf][row0 + 32 * j] = token_at(pos_of(step, buf, j), idx[buf][j]).token != nullptr;
    sm.valid_ready[buf].arrive();
  }

  // Order per step: issue 1R, convert 0L, issue 0R, convert 1R, issue 1L, convert 0R, convert 1L,
  // then issue the next step's 0L. Each issue's empty wait needs at most the regions before the
  // previous one converted (no deadlock), and the next 0L is issued only after this step's 1L is
  // converted: issuing it earlier would hold 1L (and WG1's QK) behind WG0's first PV of the step.
  // Its loads then land while WG1 computes that QK, its softmax and first PV (the wait for 1R).
  // No register load is ever outstanding at the proxy fence (a MEMBAR, which would wait for it;
  // it does not wait for cp.async).
  __device__ void run(int head0, int n_steps) {
    cutlass::arch::warpgroup_reg_dealloc<kDecodeProducerRegs>();
    // Q rows of this head block (zero rows past h_q), 16-byte chunks 2 quarter and 2 quarter + 1.
    const bf16* q_rows = static_cast<const bf16*>(p.q) + bi * p.q_batch_stride + si * p.q_row_stride;
    const int64_t q_off = sm.q - sm.kv[0];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int r = row0 + 32 * j;
      const bool ok = head0 + r < p.h_q;
      const bf16* src = q_rows + (ok ? int64_t(head0 + r) * p.q_head_stride : 0) + quarter * 16;
#pragma unroll
      for (int tile = 0; tile < kTiles; ++tile) {
        cp_async_16_zfill_l2(chunk0 + q_off + j * 2048 + tile * 4096, src + tile * 64, ok);
        cp_async_16_zfill_l2(chunk1 + q_off + j * 2048 + tile * 4096, src + tile * 64 + 8, ok);
      }
    }
    cp_async_arrive(sm.q_ready);
    cp_async_commit();
    if (n_steps == 0) {
      cp_async_wait_all();
      return;
    }

    int idx[2][2], next[2][2];
    load_indices(idx, 0);
    issue<0>(0, idx);
    for (int step = 0; step < n_steps; ++step) {
      const bool more = step + 1 < n_steps;
      if (more) load_indices(next, step + 1);
      issue<1>(step, idx);
      cp_async_wait_group<1>();
      publish_valid(step, 0, idx);
      convert<0>();
      issue<2>(step, idx);
      cp_async_wait_group<1>();
      publish_valid(step, 1, idx);
      convert<1>();
      issue<3>(step, idx);
      cp_async_wait_group<1>();
      convert<2>();
      cp_async_wait_group<0>();
      convert<3>();
      if (more) issue<0>(step + 1, next);
#pragma unroll
      for (int b = 0; b < 2; ++b)
#pragma unroll
        for (int j = 0; j < 2; ++j) idx[b][j] = next[b][j];
    }
  }
};

// Normalizes with the null sink and stores bf16 rows + lse (one split), or writes the unnormalized
// partial rows and their (max, sum) to the workspace (several splits).
template <int kDqk, int kWg>
struct DecodeEpilogue {
  const SparseMlaDecodeParams& p;
  typename SparseMlaSm90Config<kDqk>::Smem& sm;
  int row, head0, split;

  template <class Acc>
  __device__ __forceinline__ void operator()(const Acc& acc_o, const float row_max[2], const float total[2]) const {
    using sparse_mla_decode::kPartialDv;
    const int t = threadIdx.x % 128;
    const int bi = row / p.s_q, si = row % p.s_q;
    if (p.num_splits == 1) {
      sink::RowFinish f[2];
      finish_rows(row_max, total, p.attn_sink, head0, p.h_q, f);
      const float out_scale[2] = {f[0].out_scale, f[1].out_scale};
      CUTLASS_PRAGMA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int head = head0 + acc_row(h, t);
        if (kWg == 1 && t % 4 == 0 && head < p.h_q) p.lse[(int64_t(bi) * p.h_q + head) * p.s_q + si] = f[h].lse;
      }
      bf16* out = static_cast<bf16*>(p.out) + (int64_t(row) * p.h_q + head0) * kPartialDv + kWg * 256;
      store_output_half<kDqk, kWg>(sm, acc_o, out_scale, out, kPartialDv, p.h_q - head0);
      return;
    }
    const int64_t part0 = (int64_t(row) * p.num_splits + split) * p.h_q + head0;  // partial row of head0
    float* ws_o = static_cast<float*>(p.workspace) + part0 * kPartialDv + kWg * 256;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc_o); i += 2) {
      const int r = acc_row((i / 2) % 2, t), col = acc_col(i, t);
      if (head0 + r < p.h_q) *reinterpret_cast<float2*>(ws_o + r * kPartialDv + col) = make_float2(acc_o(i), acc_o(i + 1));
    }
    if (kWg == 0 && t % 4 == 0) {
      float2* ws_ml = reinterpret_cast<float2*>(static_cast<float*>(p.workspace) +
                                                sparse_mla_decode::partial_o_elems(p, p.num_splits));
      CUTLASS_PRAGMA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int r = acc_row(h, t);
        if (head0 + r < p.h_q) ws_ml[part0 + r] = make_float2(total[h] == 0.f ? -INFINITY : row_max[h], total[h]);
      }
    }
  }
};

// grid: (head blocks, num_splits, b * s_q); block: 384 threads; dynamic smem: Smem of d_qk.
template <KvCacheLayout L>
__global__ void __launch_bounds__(384, 1) sparse_mla_decode_sm90_kernel(const __grid_constant__ SparseMlaDecodeParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kDqk = KvLayout<L>::kDqk;
  using C = SparseMlaSm90Config<kDqk>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<typename C::Smem*>(smem_raw);

  const int head0 = blockIdx.x * C::kHeads;
  const int split = blockIdx.y;
  const int row = blockIdx.z;
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;

  const int total = p.pool.topk + p.extra.topk;
  const int key_begin = split * p.tiles_per_split * kDecodeStepKeys;
  const int key_end = min(key_begin + p.tiles_per_split * kDecodeStepKeys, total);
  const int n_steps = key_end > key_begin ? (key_end - key_begin + kDecodeStepKeys - 1) / kDecodeStepKeys : 0;

  if (threadIdx.x == 0) {
    sm.q_ready.init(128);
    for (int b = 0; b < 2; ++b) {
      for (int r = 0; r < 2; ++r) {
        sm.ready[b][r].init(128);  // every producer thread, once its share is converted
        sm.empty[b][r].init(128);  // the one consumer that reads the region's values
      }
      sm.valid_ready[b].init(32);  // the 32 producer threads that write the flags
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  if (wg == 2) {
    auto sKV = make_tensor(make_smem_ptr(sm.kv[0]), typename C::template Tiles<C::kTiles>{});
    DecodeProducer<L> producer{p, sm, row / p.s_q, row % p.s_q, key_begin, key_end, t % 4, t / 4, nullptr, nullptr};
    // Rows row0 + 32 j share row0's swizzle phase (it repeats every 8 rows) and tiles are 8-row
    // multiples apart, so one swizzled address per chunk serves every row and tile of this thread.
    producer.chunk0 = &sKV(producer.row0, producer.quarter * 16);
    producer.chunk1 = &sKV(producer.row0, producer.quarter * 16 + 8);
    producer.run(head0, n_steps);
    return;
  }
  if (wg == 0) consume<kDqk, 0, kDecodeConsumerRegs>(p.sm_scale, sm, n_steps, DecodeEpilogue<kDqk, 0>{p, sm, row, head0, split});
  else consume<kDqk, 1, kDecodeConsumerRegs>(p.sm_scale, sm, n_steps, DecodeEpilogue<kDqk, 1>{p, sm, row, head0, split});
#endif
}

}  // namespace sinkops::cuda::sm90

namespace sinkops::cuda::sm90 {

// Per-layout launch, instantiated in sparse_mla_decode_sm90_v4.cu / _v32.cu (they compile in parallel).
template <KvCacheLayout L>
void launch_decode_sm90(const SparseMlaDecodeParams& p, cudaStream_t stream) {
  constexpr auto kernel = sparse_mla_decode_sm90_kernel<L>;
  constexpr int smem = SparseMlaSm90Config<KvLayout<L>::kDqk>::kSmemBytes;
  reserve_dynamic_smem<kernel>(smem, "sparse_mla_decode (sm90)");
  const dim3 grid((p.h_q + 63) / 64, p.num_splits, p.b * p.s_q);
  kernel<<<grid, 384, smem, stream>>>(p);
  check_launch("sparse_mla_decode (sm90)");
}
extern template void launch_decode_sm90<KvCacheLayout::kV4>(const SparseMlaDecodeParams&, cudaStream_t);
extern template void launch_decode_sm90<KvCacheLayout::kV32>(const SparseMlaDecodeParams&, cudaStream_t);

}  // namespace sinkops::cuda::sm90
