// Sparse MLA prefill for few heads on Hopper (sm_90a; h_q <= 32 by default), DESIGN.md §2.2: keys
// in the MMA's M, heads in its N (8, 16 or 32), the few-heads decode kernel's structure
// (sparse_mla_decode_few_heads_sm90.cuh) over bf16 rows. At 8-16 heads a query is bound by
// gathering its top-k rows (bench/gather_ceiling.py: 2.7 GB per 4096 x 640 call at 8 heads, ~8
// TB/s for a kernel that does nothing else), not by MMAs, so the CTA is small and several share an
// SM to keep rows in flight: one CTA = one warpgroup = one query x a block of N heads (heads past
// h_q are zero columns never stored), 2-3 CTAs per SM (3 at 8 heads, 2 at 16 and 32). Per 64-key block, all 128 threads:
//   1. copy the block's rows into the key tile by cp.async (zero-filled for an invalid key), the
//      next block's indices loading meanwhile; wait, fence, sync;
//   2. FewHeadsSoftmax::block: S^T = K Q^T, the online softmax down each column, O^T += V^T P^T.
// The other CTAs of the SM gather while this one multiplies. Epilogue: the null sink folded once
// (sink_policy.cuh), lse and max_logits as the other prefill kernels (DESIGN §2.2), the bf16 rows.
#pragma once
#include "sparse_mla_decode_few_heads_sm90.cuh"

namespace sinkops::cuda::sm90 {

// The decode's few-heads tiles and shared memory: only the source of the key rows differs (v4's
// config is d_qk 512, v32's 576).
template <int kDqk, int kN>
using FewHeadsPrefillConfig = FewHeadsDecodeConfig<kDqk == 576 ? KvCacheLayout::kV32 : KvCacheLayout::kV4, kN>;

// Heads per CTA of the prefill: 8, 16 or 32, the fewest that hold h_q (32-head blocks above). Up to
// 32 heads, unlike the decode: no register staging sits beside the 128 accumulator registers of N = 32.
constexpr int kFewHeadsPrefillMax = 32;
__host__ __device__ constexpr int few_heads_prefill_cta_heads(int h_q) { return h_q <= 8 ? 8 : h_q <= 16 ? 16 : 32; }

// The block gather of bf16 rows: thread t copies 16-byte chunk t % 8 of each 64-channel tile of key
// rows t / 8 + 16 j (j < 4), so the 32 lanes of a warp read 4 rows x 128 contiguous bytes per copy.
// Rows row0 + 16 j share row0's swizzle phase (it repeats every 8 rows) and tiles are whole, so one
// swizzled destination per thread serves every row and tile.
template <int kDqk>
struct Bf16BlockGather {
  static constexpr int kTiles = kDqk / 64, kRows = 4;
  const SparseMlaPrefillParams& p;
  const int32_t* idx_row;  // the query's top-k indices
  int n;                   // valid positions of the list: min(topk_length, topk)
  int chunk, row0;
  uint32_t dst0;  // shared address of row row0, chunk `chunk`, tile 0 of the key tile

  __device__ __forceinline__ Bf16BlockGather(const SparseMlaPrefillParams& params, int64_t q_idx, bf16* tile, int t)
      : p(params), idx_row(params.indices + q_idx * params.indices_row_stride), chunk(t % 8), row0(t / 8) {
    n = p.topk;
    if (p.topk_length != nullptr) n = max(0, min(n, p.topk_length[q_idx]));
    auto sK = make_tensor(make_smem_ptr(tile), typename SparseMlaSm90Config<kDqk>::template Tiles<kTiles>{});
    dst0 = cast_smem_ptr_to_uint(&sK(row0, chunk * 8));
  }

  // The slot of each of this thread's rows of block blk; -1 past the list.
  __device__ __forceinline__ void load_indices(int (&idx)[kRows], int blk) const {
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int pos = blk * 64 + row0 + 16 * j;
      idx[j] = pos < n ? idx_row[pos] : -1;
    }
  }

  // Issues the copies of block blk's rows (zero-filled where invalid) and publishes which keys are
  // valid in valid[64] (read after the caller's __syncthreads).
  __device__ __forceinline__ void copy(const int (&idx)[kRows], int32_t* valid) const {
    const bf16* kv = static_cast<const bf16*>(p.kv);
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const bool ok = idx[j] >= 0 && idx[j] < p.s_kv;
      const bf16* src = kv + (ok ? int64_t(idx[j]) * p.kv_row_stride : 0) + chunk * 8;  // row 0 when invalid: no OOB address
#pragma unroll
      for (int tile = 0; tile < kTiles; ++tile)
        cp_async_16_zfill_l2(dst0 + uint32_t((j * 16 * 64 + tile * 4096) * sizeof(bf16)), src + tile * 64, ok);
      if (chunk == 0) valid[row0 + 16 * j] = ok;
    }
  }
};

// grid: (s_q, head blocks of kN); block: 128 threads; dynamic smem: FewHeadsPrefillConfig::Smem.
template <int kDqk, int kN>
__global__ void __launch_bounds__(kFewHeadsThreads, (FewHeadsPrefillConfig<kDqk, kN>::kCtasPerSm))
    sparse_mla_prefill_few_heads_sm90_kernel(const __grid_constant__ SparseMlaPrefillParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = FewHeadsPrefillConfig<kDqk, kN>;
  using Gather = Bf16BlockGather<kDqk>;
  constexpr int kTiles = C::kTiles, kCols = C::kCols, kDv = C::kDv;
  static_assert(C::kDqk == kDqk, "config");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<typename C::Smem*>(smem_raw);

  const int64_t q_idx = blockIdx.x;
  const int head0 = blockIdx.y * kN;
  const int n_heads = min(kN, p.h_q - head0);  // this CTA's heads head0 .. head0 + n_heads - 1
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  const Gather g(p, q_idx, sm.kv, t);
  const int n_blocks = (g.n + 63) / 64;
  int idx[Gather::kRows];
  if (n_blocks > 0) g.load_indices(idx, 0);

  // Q [kN, d_qk] of heads head0.., zero rows past h_q: in the first block's cp.async wait.
  {
    auto sQ = make_tensor(make_smem_ptr(sm.q), typename C::template HeadTiles<kTiles>{});
    const bf16* q_row = static_cast<const bf16*>(p.q) + q_idx * p.q_row_stride + int64_t(head0) * p.q_head_stride;
    constexpr int kChunks = kDqk / 8;
    for (int c = t; c < kN * kChunks; c += kFewHeadsThreads) {
      const int h = c / kChunks, ch = (c % kChunks) * 8;
      const bool ok = h < n_heads;
      cp_async_16_zfill_l2(&sQ(h, ch), q_row + (ok ? int64_t(h) * p.q_head_stride : 0) + ch, ok);
    }
  }

  Tensor acc_s = partition_fragment_C(typename C::MmaQK{}, Shape<_64, Int<kN>>{});        // S^T, then P^T
  Tensor acc_o = partition_fragment_C(typename C::MmaPV{}, Shape<Int<kDv>, Int<kN>>{});  // O^T
  clear(acc_o);
  FewHeadsSoftmax<C> softmax;
  const float scale_log2 = p.sm_scale * sink::kLog2e;

  for (int blk = 0; blk < n_blocks; ++blk) {
    g.copy(idx, sm.valid);
    cp_async_commit();
    if (blk + 1 < n_blocks) g.load_indices(idx, blk + 1);  // in flight during the wait and the block's math
    cp_async_wait_all();
    cutlass::arch::fence_view_async_shared();  // cp.async (generic proxy) -> the wgmmas
    __syncthreads();
    softmax.block(sm, acc_s, acc_o, scale_log2, t);
  }
  if (n_blocks == 0) {  // an empty list: Q's copies land before the CTA stages its zero output and exits
    cp_async_wait_all();
    __syncthreads();
  }

  float total[kCols];
  softmax.totals(sm, total, t);
  const bool writes_stats = warp == 0 && lane < 4;  // lanes 0..3 of warp 0 hold every column once
  float out_scale[kCols];
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < kN / 2; i += 4) {
    CUTLASS_PRAGMA_UNROLL
    for (int e = 0; e < 2; ++e) {
      const int c = col_slot(i + e), head = acc_col(i + e, t);
      const float m = total[c] == 0.f ? -INFINITY : softmax.col_max[c];
      const sink::RowFinish f =
          sink::NullSink::finish(m, total[c], sink::load_log2(p.attn_sink, head0 + min(head, n_heads - 1)));
      out_scale[c] = f.out_scale;
      if (writes_stats && head < n_heads) {
        const int64_t sh = q_idx * p.h_q + head0 + head;
        p.lse[sh] = f.lse;
        p.max_logits[sh] = f.max_logit;
      }
    }
  }
  few_heads_store_output<C>(sm, acc_o, out_scale,
                            static_cast<bf16*>(p.out) + q_idx * p.out_row_stride + int64_t(head0) * p.out_head_stride,
                            p.out_head_stride, n_heads, t);
#endif
}

template <int kDqk>
void launch_prefill_few_heads_sm90(const SparseMlaPrefillParams& p, cudaStream_t stream) {
  auto launch = [&](auto n) {
    constexpr int kN = decltype(n)::value;
    launch_few_heads_kernel<sparse_mla_prefill_few_heads_sm90_kernel<kDqk, kN>, FewHeadsPrefillConfig<kDqk, kN>::kSmemBytes>(
        "sparse_mla_prefill (sm90, few heads)", dim3(unsigned(p.s_q), (p.h_q + kN - 1) / kN), p, stream);
  };
  switch (few_heads_prefill_cta_heads(p.h_q)) {
    case 8: launch(Int<8>{}); break;
    case 16: launch(Int<16>{}); break;
    default: launch(Int<32>{});
  }
  check_launch("sparse_mla_prefill (sm90, few heads)");
}

}  // namespace sinkops::cuda::sm90
