// Sparse MLA decode over the paged FP8 KV caches for few heads on Hopper (sm_90a; by default h_q <= 16),
// DESIGN.md §2.3: keys in the MMA's M, heads in its N (8 or 16), so nothing is padded to the
// 64 heads of sparse_mla_decode_sm90.cuh (issue 10, item 2; bench/NOTES.md "Decode, few heads").
// Up to 16 heads: at N = 32 the accumulator O^T (128 registers) beside the next block's staged
// bytes (76-88) spills, and the 64-head kernel was faster there (24 vs 40 us at b64 h32).
//
// One CTA = one warpgroup = one (batch, s_q) row x a block of N heads (heads past h_q are zero
// columns that are never stored; one block up to 16 heads, 8-head blocks above) x a split of the row's key
// list; two or three CTAs per SM (76-93 KB of shared memory each), which hide each other's load
// latency, conversion and MMAs. Per 64-key block, all 128 threads:
//   1. convert the block's staged bytes into the bf16 tile (Fp8BlockGather::store), fence, sync;
//   2. issue the register loads of the next block, in flight during 3-5;
//   3. S^T = K Q^T: wgmma m64nNk16, A = the tile [64 keys, d_qk], B = Q [N heads, d_qk];
//   4. online softmax down each column (a head's 64 keys lie in 4 warps: shuffles, then one
//      exchange of 4 x N maxima through shared memory); P^T to shared memory, bf16 [N, 64 keys];
//   5. O^T += V^T P^T: A = the tile viewed as [512 channels, 64 keys] (MN-major), B = P^T;
//      O^T [512, N] stays in registers (4 N fp32 per thread).
// The MMAs read each key's 1152 bf16 bytes twice from shared memory and the conversion writes
// them once, where the 64-head kernel at 8 heads does 8x the MMA work of the useful heads and
// converts every block on one producer warpgroup.
// Epilogue as the 64-head kernel's: one split folds the null sink (sink_policy.cuh) and writes
// lse; several write unnormalized partials for the combine (sparse_mla_decode.cu).
#pragma once
#include "../kernel_launch.cuh"
#include "../sparse_mla_decode_plan.cuh"
#include "sparse_mla_decode_gather_sm90.cuh"

namespace sinkops::cuda::sm90 {

constexpr int kFewHeadsMax = 16;
constexpr int kFewHeadsThreads = 128;
constexpr int kFewHeadsBlockKeys = 64;  // keys per block (the M of the QK) and per plan tile

template <KvCacheLayout L, int kN>
struct FewHeadsDecodeConfig {
  static_assert(kN == 8 || kN == 16 || kN == 32, "heads per CTA: the N of the wgmmas (32: the prefill only)");
  static constexpr int kHeads = kN;  // heads of a row per CTA (its head block)
  static constexpr int kDqk = KvLayout<L>::kDqk;
  using Base = SparseMlaSm90Config<kDqk>;  // the key tile's layout and its [channels, keys] view
  static constexpr int kTiles = Base::kTiles;  // 8 (v4) or 9 (v32) 64-channel tiles per key row
  static constexpr int kDv = 512;
  static constexpr int kValueTiles = kDv / 64;
  static constexpr int kCols = kN / 4;  // accumulator columns (heads) of each thread

  // [kN heads, 64 T channels] bf16, K-major, 128-byte swizzle: tile t at element offset 64 kN t.
  template <int T>
  using HeadTiles =
      decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<bf16>{}, Shape<Int<kN>, Int<64 * T>>{}, Step<_1, _2>{}));
  using MmaQK = decltype(make_tiled_mma(SM90::GMMA::ss_op_selector<bf16, bf16, float, Shape<_64, Int<kN>, _16>,
                                                                   GMMA::Major::K, GMMA::Major::K>()));
  using MmaPV = decltype(make_tiled_mma(SM90::GMMA::ss_op_selector<bf16, bf16, float, Shape<_64, Int<kN>, _16>,
                                                                   GMMA::Major::MN, GMMA::Major::K>()));

  // v32's RoPE tile (channels 512..575) is read by the QK only: P^T lives there once the QK is done.
  static constexpr bool kPInRope = kDqk == 576;
  struct Smem {
    alignas(1024) bf16 kv[64 * kDqk];  // [64 keys, d_qk] Base::Tiles<kTiles>; the epilogue's staging
    alignas(1024) bf16 q[kN * kDqk];   // [kN heads, d_qk] HeadTiles<kTiles>
    float col_part[4][kN];             // per warp and head: the max over the warp's 16 keys, at the end the sum
    int32_t valid[64];                 // per key of the block: gathered (1) or masked (0)
    alignas(1024) bf16 p[kPInRope ? 1 : kN * 64];  // [kN heads, 64 keys] HeadTiles<1>: P^T (v4)
  };
  static constexpr int kSmemBytes = sizeof(Smem);
  // CTAs per SM (228 KB of shared memory, 1 KB of it reserved per CTA): three where they fit (v4 at
  // 8 heads: 76 KB; the launch bound then caps the registers at 168), else two.
  static constexpr int kCtasPerSm = 3 * (kSmemBytes + 1024) <= 228 * 1024 ? 3 : 2;
  static_assert(kCtasPerSm * (kSmemBytes + 1024) <= 228 * 1024, "CTAs per SM");
};

// The heads of a CTA (N) for a call: 8 up to 8 heads, 16 up to 16, and 8-head blocks above (the
// default takes those only at batch-1-like shapes, where more CTAs and smaller ones pay).
__host__ __device__ constexpr int few_heads_cta_heads(int h_q) { return h_q <= 8 || h_q > 16 ? 8 : 16; }

// Accumulator value i (of the kN / 2 of an m64nN tile) -> this thread's column slot (0 .. kN/4-1);
// its column is acc_col(i, t).
__device__ __forceinline__ constexpr int col_slot(int i) { return (i / 4) * 2 + (i % 2); }

// Reduces each of this thread's kCols column values over the warp's 16 keys (the lanes of one
// lane % 4) by max (kMax) or sum and publishes the warp's results in col_part[warp] (read after a
// __syncthreads); the column of slot col_slot(i) is acc_col(i, t).
template <bool kMax, int kCols>
__device__ __forceinline__ void publish_columns(float (&v)[kCols], float (*col_part)[4 * kCols], int t) {
  CUTLASS_PRAGMA_UNROLL
  for (int c = 0; c < kCols; ++c) {
    CUTLASS_PRAGMA_UNROLL
    for (int off = 4; off < 32; off *= 2) {
      const float other = __shfl_xor_sync(0xffffffffu, v[c], off);
      v[c] = kMax ? fmaxf(v[c], other) : v[c] + other;
    }
  }
  if (t % 32 < 4) {
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < 2 * kCols; i += 4) {
      col_part[t / 32][acc_col(i, t)] = v[col_slot(i)];
      col_part[t / 32][acc_col(i + 1, t)] = v[col_slot(i + 1)];
    }
  }
}

// The online softmax of one CTA's columns (heads) over its 64-key blocks, shared by the few-heads
// decode and prefill kernels (sparse_mla_prefill_few_heads_sm90.cuh): per block, S^T = K Q^T from
// the key tile and Q, masked keys -> -inf, each column's max over the block (4 warps: shuffles and
// one exchange through col_part), P^T to shared memory, O^T rescaled and O^T += V^T P^T. The caller
// has published the tile (fence + __syncthreads); on return every warp is done with the tile and
// P^T (the last __syncthreads), so the tile may be refilled.
template <class C>
struct FewHeadsSoftmax {
  static constexpr int kN = C::kHeads, kCols = C::kCols, kTiles = C::kTiles, kDv = C::kDv;
  float col_max[kCols];  // per column slot: running max (log2 units)
  float col_sum[kCols];  // this thread's share of the column's sum

  __device__ __forceinline__ FewHeadsSoftmax() {
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < kCols; ++c) col_max[c] = -INFINITY, col_sum[c] = 0.f;
  }

  // sm: the kernel's C::Smem (kv = the published key tile, q, valid, col_part, p).
  template <class Smem, class AccS, class AccO>
  __device__ __forceinline__ void block(Smem& sm, AccS& acc_s, AccO& acc_o, float scale_log2, int t) {
    using Base = typename C::Base;
    CUTLASS_PRAGMA_UNROLL
    for (int tile = 0; tile < kTiles; ++tile) {  // S^T = K Q^T
      auto sKt = make_tensor(make_smem_ptr(sm.kv + tile * 4096), typename Base::template Tiles<1>{});
      auto sQt = make_tensor(make_smem_ptr(sm.q + tile * 64 * kN), typename C::template HeadTiles<1>{});
      wgmma_ss(typename C::MmaQK{}, sKt, sQt, acc_s, tile == 0, t);
    }
    warpgroup_commit_batch();
    warpgroup_wait<0>();

    // Masked keys -> -inf, the rest in log2 units; each column's max over the block's 64 keys.
    float m_blk[kCols];
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < kCols; ++c) m_blk[c] = -INFINITY;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc_s); ++i) {
      acc_s(i) = sm.valid[acc_row((i / 2) % 2, t)] ? acc_s(i) * scale_log2 : -INFINITY;
      m_blk[col_slot(i)] = fmaxf(m_blk[col_slot(i)], acc_s(i));
    }
    publish_columns<true>(m_blk, sm.col_part, t);
    __syncthreads();
    float m_use[kCols], rescale[kCols];
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc_s); i += 4) {
      CUTLASS_PRAGMA_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int c = col_slot(i + e), col = acc_col(i + e, t);
        const float m_new = fmaxf(fmaxf(col_max[c], fmaxf(sm.col_part[0][col], sm.col_part[1][col])),
                                  fmaxf(sm.col_part[2][col], sm.col_part[3][col]));
        m_use[c] = m_new == -INFINITY ? 0.f : m_new;  // no valid key yet: its terms stay exactly 0
        rescale[c] = ptx::exp2_approx(col_max[c] - m_use[c]);
        col_max[c] = m_new;
        col_sum[c] *= rescale[c];
      }
    }
    auto sP = make_tensor(make_smem_ptr(C::kPInRope ? sm.kv + 64 * kDv : sm.p), typename C::template HeadTiles<1>{});
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc_s); ++i) {
      const float pv = ptx::exp2_approx(acc_s(i) - m_use[col_slot(i)]);
      col_sum[col_slot(i)] += pv;
      sP(acc_col(i, t), acc_row((i / 2) % 2, t)) = bf16(pv);
    }
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc_o); ++i) acc_o(i) *= rescale[col_slot(i % (kN / 2))];
    cutlass::arch::fence_view_async_shared();  // P^T's generic-proxy stores -> the PV's reads
    __syncthreads();
    auto sVt = make_tensor(make_smem_ptr(sm.kv), typename Base::template ValueView<C::kValueTiles>{});
    wgmma_ss(typename C::MmaPV{}, sVt, sP, acc_o, false, t);  // O^T += V^T P^T
    warpgroup_commit_batch();
    warpgroup_wait<0>();
    __syncthreads();  // every warp's PV has read the tile and P^T before the next fill
  }

  // Each column's sum over the 4 warps (a fixed order) into total[]; ends with a __syncthreads.
  template <class Smem>
  __device__ __forceinline__ void totals(Smem& sm, float (&total)[kCols], int t) {
    publish_columns<false>(col_sum, sm.col_part, t);
    __syncthreads();
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < kN / 2; i += 4) {
      CUTLASS_PRAGMA_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int col = acc_col(i + e, t);
        total[col_slot(i + e)] =
            ((sm.col_part[0][col] + sm.col_part[1][col]) + sm.col_part[2][col]) + sm.col_part[3][col];
      }
    }
  }
};

// The normalized bf16 output of one CTA's heads: O^T scaled per column (out_scale per column slot)
// and staged in the key tile (free: the caller's loop ended with a sync), [kN heads][512 channels],
// a row's 16-byte chunks XOR-swizzled by head % 8 (both the accumulator's column-wise writes and
// the row-wise reads are free of bank conflicts), then stored as 16-byte chunks: head h of
// `n_heads` at out + h * head_stride (elements).
template <class C, class Smem, class AccO>
__device__ __forceinline__ void few_heads_store_output(Smem& sm, const AccO& acc_o, const float (&out_scale)[C::kCols],
                                                       bf16* out, int64_t head_stride, int n_heads, int t) {
  constexpr int kN = C::kHeads, kDv = C::kDv;
  bf16* stage = sm.kv;
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < size(acc_o); ++i) {
    const int v = i % (kN / 2), ch = 64 * (i / (kN / 2)) + acc_row((v / 2) % 2, t), head = acc_col(v, t);
    stage[head * kDv + (ch ^ ((head & 7) << 3))] = bf16(acc_o(i) * out_scale[col_slot(v)]);
  }
  __syncthreads();
  for (int c = t; c < kN * (kDv / 8); c += 128) {
    const int head = c / (kDv / 8), chunk = c % (kDv / 8);
    if (head < n_heads)
      *reinterpret_cast<uint4*>(out + head * head_stride + chunk * 8) =
          *reinterpret_cast<const uint4*>(stage + head * kDv + ((chunk ^ (head & 7)) * 8));
  }
}

// grid: (num_splits, b * s_q, head blocks of kN); block: 128 threads; dynamic smem: FewHeadsDecodeConfig::Smem.
template <KvCacheLayout L, int kN>
__global__ void __launch_bounds__(kFewHeadsThreads, (FewHeadsDecodeConfig<L, kN>::kCtasPerSm))
    sparse_mla_decode_few_heads_sm90_kernel(const __grid_constant__ SparseMlaDecodeParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = FewHeadsDecodeConfig<L, kN>;
  using Gather = Fp8BlockGather<L>;
  using MmaQK = typename C::MmaQK;
  using MmaPV = typename C::MmaPV;
  constexpr int kDqk = C::kDqk, kTiles = C::kTiles, kCols = C::kCols, kDv = C::kDv;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<typename C::Smem*>(smem_raw);
  allow_dependents();  // the combine (a programmatic dependent) may be scheduled now; it waits for us

  const int split = blockIdx.x, row = blockIdx.y, head0 = blockIdx.z * kN;
  const int n_heads = min(kN, p.h_q - head0);  // this CTA's heads head0 .. head0 + n_heads - 1
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  const int total_keys = p.pool.topk + p.extra.topk;
  const int key_begin = split * p.tiles_per_split * kFewHeadsBlockKeys;
  const int key_end = min(key_begin + p.tiles_per_split * kFewHeadsBlockKeys, total_keys);
  const int n_blocks = key_end > key_begin ? (key_end - key_begin + kFewHeadsBlockKeys - 1) / kFewHeadsBlockKeys : 0;
  const Gather g(p, row, key_begin, key_end, sm.kv, t);
  int idx[2];
  if (n_blocks > 0) g.load_indices(idx, 0);  // first: the block's row loads wait for these

  // Q [kN, d_qk] of heads head0.., zero rows past h_q; waited for before the first block's fence.
  {
    auto sQ = make_tensor(make_smem_ptr(sm.q), typename C::template HeadTiles<kTiles>{});
    const bf16* q_row = static_cast<const bf16*>(p.q) + g.bi * p.q_batch_stride + g.si * p.q_row_stride +
                        int64_t(head0) * p.q_head_stride;
    constexpr int kChunks = kDqk / 8;
    for (int c = t; c < kN * kChunks; c += kFewHeadsThreads) {
      const int h = c / kChunks, ch = (c % kChunks) * 8;
      const bool ok = h < n_heads;
      cp_async_16_zfill_l2(&sQ(h, ch), q_row + (ok ? int64_t(h) * p.q_head_stride : 0) + ch, ok);
    }
    cp_async_commit();
  }
  typename Gather::Staged staged[2];
  if (n_blocks > 0) {
    g.load(staged, 0, idx);
    if (n_blocks > 1) g.load_indices(idx, 1);
  }

  Tensor acc_s = partition_fragment_C(MmaQK{}, Shape<_64, Int<kN>>{});         // S^T, then P^T: kN / 2 per thread
  Tensor acc_o = partition_fragment_C(MmaPV{}, Shape<Int<kDv>, Int<kN>>{});   // O^T: 8 tiles of kN / 2 per thread
  static_assert(size(decltype(acc_s){}) == kN / 2 && size(decltype(acc_o){}) == 4 * kN, "accumulator layouts");
  clear(acc_o);
  FewHeadsSoftmax<C> softmax;
  const float scale_log2 = p.sm_scale * sink::kLog2e;
  cp_async_wait_all();

  for (int blk = 0; blk < n_blocks; ++blk) {
    g.store(staged, 0, sm.valid);
    cutlass::arch::fence_view_async_shared();  // generic-proxy stores (and Q's cp.async) -> the wgmmas
    __syncthreads();
    if (blk + 1 < n_blocks) {
      g.load(staged, blk + 1, idx);
      if (blk + 2 < n_blocks) g.load_indices(idx, blk + 2);
    }
    softmax.block(sm, acc_s, acc_o, scale_log2, t);
  }

  // ---- the column sums (4 warps, a fixed order), the sink, the output ----
  float total[kCols];
  softmax.totals(sm, total, t);
  const float(&col_max)[kCols] = softmax.col_max;
  const bool writes_stats = warp == 0 && lane < 4;  // lanes 0..3 of warp 0 hold every column once
  if (p.num_splits == 1) {
    float out_scale[kCols];
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc_s); i += 4) {
      CUTLASS_PRAGMA_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int c = col_slot(i + e), head = acc_col(i + e, t);
        const float m = total[c] == 0.f ? -INFINITY : col_max[c];
        const sink::RowFinish f =
            sink::NullSink::finish(m, total[c], sink::load_log2(p.attn_sink, head0 + min(head, n_heads - 1)));
        out_scale[c] = f.out_scale;
        if (writes_stats && head < n_heads) p.lse[(int64_t(g.bi) * p.h_q + head0 + head) * p.s_q + g.si] = f.lse;
      }
    }
    few_heads_store_output<C>(sm, acc_o, out_scale, static_cast<bf16*>(p.out) + (int64_t(row) * p.h_q + head0) * kDv,
                              kDv, n_heads, t);
  } else {
    const int64_t part0 = (int64_t(row) * p.num_splits + split) * p.h_q + head0;  // partial row of head0
    if (writes_stats) {
      float2* ws_ml = reinterpret_cast<float2*>(static_cast<float*>(p.workspace) +
                                                sparse_mla_decode::partial_o_elems(p, p.num_splits));
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(acc_s); i += 4) {
        CUTLASS_PRAGMA_UNROLL
        for (int e = 0; e < 2; ++e) {
          const int c = col_slot(i + e), head = acc_col(i + e, t);
          if (head < n_heads) ws_ml[part0 + head] = make_float2(total[c] == 0.f ? -INFINITY : col_max[c], total[c]);
        }
      }
    }
    static_assert(kN * kDv * 4 <= 64 * kDqk * 2, "the fp32 partial fits in the key tile");
    float* stage = reinterpret_cast<float*>(sm.kv);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc_o); ++i) {
      const int v = i % (kN / 2), ch = 64 * (i / (kN / 2)) + acc_row((v / 2) % 2, t), head = acc_col(v, t);
      stage[head * kDv + (ch ^ ((head & 7) << 2))] = acc_o(i);
    }
    __syncthreads();
    float* ws_o = static_cast<float*>(p.workspace) + part0 * kDv;
    for (int c = t; c < kN * (kDv / 4); c += kFewHeadsThreads) {
      const int head = c / (kDv / 4), chunk = c % (kDv / 4);
      if (head < n_heads)
        *reinterpret_cast<float4*>(ws_o + head * kDv + chunk * 4) =
            *reinterpret_cast<const float4*>(stage + head * kDv + ((chunk ^ (head & 7)) * 4));
    }
  }
#endif
}

// One launch of a few-heads kernel (the decode's or the prefill's): 128 threads, its config's shared
// memory with the carveout at its maximum (2-3 CTAs per SM).
template <auto kKernel, int kSmemBytes, class Params>
void launch_few_heads_kernel(const char* what, dim3 grid, const Params& p, cudaStream_t stream) {
  reserve_dynamic_smem<kKernel>(kSmemBytes, what, /*max_carveout=*/true);
  kKernel<<<grid, kFewHeadsThreads, kSmemBytes, stream>>>(p);
}

// Per-layout launch, instantiated in sparse_mla_decode_few_heads_sm90_v4.cu / _v32.cu.
template <KvCacheLayout L>
void launch_decode_few_heads_sm90(const SparseMlaDecodeParams& p, cudaStream_t stream) {
  auto launch = [&](auto n) {
    constexpr int kN = decltype(n)::value;
    launch_few_heads_kernel<sparse_mla_decode_few_heads_sm90_kernel<L, kN>, FewHeadsDecodeConfig<L, kN>::kSmemBytes>(
        "sparse_mla_decode (sm90, few heads)", dim3(p.num_splits, p.b * p.s_q, (p.h_q + kN - 1) / kN), p, stream);
  };
  if (few_heads_cta_heads(p.h_q) == 8) launch(Int<8>{});
  else launch(Int<16>{});
  check_launch("sparse_mla_decode (sm90, few heads)");
}
extern template void launch_decode_few_heads_sm90<KvCacheLayout::kV4>(const SparseMlaDecodeParams&, cudaStream_t);
extern template void launch_decode_few_heads_sm90<KvCacheLayout::kV32>(const SparseMlaDecodeParams&, cudaStream_t);

}  // namespace sinkops::cuda::sm90
