// The consumer side of the Hopper (sm_90a) sparse MLA prefill over bf16 KV
// (sparse_mla_prefill_sm90.cuh): one query row's top-k keys, 64 heads per CTA, gathered into
// 128-byte-swizzled shared-memory buffers. The decode over the FP8 caches
// (sparse_mla_decode_sm90.cuh) shares the tile layouts and MMA atoms (SparseMlaSm90Config),
// finish_rows, the output stores and the TMA maps, but not consume(): its producer converts, and with this
// file's "each consumer owns one block of a step" layout both buffers stay busy for a whole step,
// so the conversion cannot run ahead (bench/NOTES.md, decode v2.1 -> v4).
//
// One CTA = one query row x 64 heads (the M of every wgmma; heads past h_q are zero rows that are
// never stored). 3 warpgroups:
//   WG2, producer: loads Q once, then per step fills two 64-key blocks, block 2s into buffer 0
//        and 2s+1 into buffer 1, each buffer in two regions: L = channels 0..255 and R = the rest
//        (256..d_qk-1, RoPE included), so a region is refilled as soon as its readers are done.
//        It publishes which keys of a block are valid (valid[buf], valid_ready[buf]).
//   WG0, WG1, consumers (consume() below): WGc computes S_c = Q K_c^T for buffer c's block
//        (64 heads x 64 keys, fp32 in registers) and owns output channels 256c..256c+255
//        (64 x 256 fp32 = 128 registers per thread). O_c needs both blocks: P_c from registers
//        (RS wgmma) and the other consumer's P through shared memory (SS wgmma).
// Softmax order per step (both consumers must end a step with the same row max):
//   WG0: m0 = max(m, rowmax S_0) -> P_0 -> publish m0 ->            O_0 += P_0 V_0[L]
//   WG1:                 wait m0 -> m1 = max(m0, rowmax S_1) -> P_1 -> publish m1 -> O_1 += P_1 V_1[R]
//   WG0: wait m1, rescale P_0, O_0, l_0 by 2^(m0 - m1), publish P_0; both: O_c += P_other V_other
// so WG1's softmax overlaps WG0's MMAs. Region L of a buffer is read by WG0 (values) and R by
// WG1 (values), so WG0 frees the L regions and WG1 the R regions; the QK of the buffer's owner
// is done before either consumer gets there.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "../lazy_rescale.cuh"
#include "../mma_sm80.cuh"  // ptx::exp2_approx (MUFU.EX2 alone)
#include "../sink_policy.cuh"
#include "kv_tile_maps.cuh"  // tma_store_3d, l2_evict_first_policy, CUtensorMap
#include "wgmma.cuh"

namespace sinkops::cuda::sm90 {

// Tuning knob, off (bench/NOTES.md "Prefill v1.4": 0.5-1.3 % faster on uniform top-k rows, within
// noise to 2 % slower on ragged ones in one H100 run): SINKOPS_PREFILL_MASK_VOTE, a consumer warp
// votes on the block's 64 valid flags and skips the per-element mask when all are set.
#ifndef SINKOPS_PREFILL_MASK_VOTE
#define SINKOPS_PREFILL_MASK_VOTE 0
#endif
constexpr bool kPrefillMaskVote = SINKOPS_PREFILL_MASK_VOTE != 0;

template <int kDqk>
struct SparseMlaSm90Config {
  static_assert(kDqk == 512 || kDqk == 576, "v4 (512) and v32 (576) rows");
  static constexpr int kHeads = 64;                  // rows of every wgmma
  static constexpr int kBlockKeys = 64;              // keys per block, one block per consumer per step
  static constexpr int kDv = 512;
  static constexpr int kTiles = kDqk / 64;           // 64-channel tiles per row: 8 or 9
  static constexpr int kLeftTiles = 4;               // region L: tiles 0..3 (values 0..255)
  static constexpr int kThreads = 384;
  static constexpr int kConsumerRegs = 216, kProducerRegs = 72;  // 2 x 128 x 216 + 128 x 72 <= 64K

  // [rows, 64 T] bf16, K-major, 128-byte swizzle; tile t (channels 64t..64t+63) is 64 x 64 and
  // contiguous at element offset 4096 t.
  template <int T>
  using Tiles = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<bf16>{}, Shape<Int<64>, Int<64 * T>>{},
                                       Step<_1, _2>{}));
  // The [64 T channels, 64 keys] view of a KV buffer's tiles (V^T, channel-major) for the PV MMA.
  template <int T>
  using ValueView = decltype(composition(Tiles<T>{}, Layout<Shape<Int<64 * T>, Int<64>>, Stride<Int<64>, _1>>{}));

  using MmaQK = decltype(make_tiled_mma(GMMA::MMA_64x64x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>{}));
  using MmaPVReg = decltype(make_tiled_mma(GMMA::MMA_64x256x16_F32BF16BF16_RS<GMMA::Major::K, GMMA::Major::MN>{}));
  using MmaPVSmem = decltype(make_tiled_mma(GMMA::MMA_64x256x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::MN>{}));

  // v32 rows end in 64 RoPE channels (tile 8) that only the QK reads: once WG0's QK of buffer 0 is
  // done, that tile holds P_0 (the producer refills it only after WG1 has read P_0).
  static constexpr bool kP0InRope = kDqk == 576;

  struct Smem {
    alignas(1024) bf16 q[kHeads * kDqk];                  // [64 heads, d_qk]   Tiles<kTiles>
    alignas(1024) bf16 kv[2][kBlockKeys * kDqk];          // [2][64 keys, d_qk] Tiles<kTiles>
    alignas(1024) bf16 p[kP0InRope ? 1 : 2][kHeads * kBlockKeys];  // [64 heads, 64 keys] Tiles<1>: P_1 (and P_0)
    float2 row_max[32];        // the published max of rows (r, r + 8) of each consumer thread quad
    float4 row_stats[2][32];   // per consumer, for the end: (row sums, true maxes) of rows (r, r + 8)
    int32_t valid[2][kBlockKeys];  // per buffer: key gathered (1) or masked (0)
    Barrier q_ready;
    Barrier ready[2][2], empty[2][2];  // [buffer][region L, R]
    Barrier valid_ready[2];            // [buffer]
    Barrier gathered[2][2];            // [buffer][region]: this CTA's half landed (2-CTA pairs only)
    Barrier p0_free;  // 2-CTA pairs with P_0 in the RoPE tile: the peer has the half sent from there
  };
  static constexpr int kSmemBytes = sizeof(Smem);
};

// Named barrier ids (0 is __syncthreads); each joins both consumers (256 threads). Every hand-over
// inside a step goes one way (the producer of the value arrives, its reader waits): m0 (WG0 -> WG1),
// m1 (WG1 -> WG0), P_0 (WG0 -> WG1), P_1 (WG1 -> WG0), so neither consumer waits for more of the
// other's work than the value it needs (FlashMLA's pattern; against full syncs on m1 and the P
// tiles it measured level, and racecheck flags fewer sites: bench/NOTES.md "Prefill v1.2").
// Each barrier is used once per step, and a step's waits order every read of the shared max and
// P tiles before the next step overwrites them (see consume()).
enum SparseMlaBarrier : int {
  kMax0Ready = 1,
  kMax1Ready = 2,
  kP0Ready = 3,
  kSumReady = 4,
  kOut0Staged = 5,
  kOut1Staged = 6,
  kP1Ready = 7
};

// The online-softmax update of a consumer thread's two accumulator rows (acc_row(0 / 1)), shared
// by the prefill's consumers and the decode's WG0. acc_s holds raw logits (masked keys -inf);
// scale_log2 > 0 (the launchers' takes), so the row max is taken on raw logits and the scale folds
// into the exponent's FFMA. m_new = lazy_max(m_base, scale_log2 * row max of S) (lazy_rescale.cuh:
// m_base unless the block's max exceeds it by more than 8, so O is almost never rescaled and
// row_max may lie up to 8 below the true max); P = 2^(x - m_new)
// into acc_s (fp32) and p_reg (bf16); seen_max[h] = max(seen_max[h], the block's max) (log2 units);
// O and this thread's row sums rescaled by rescale = 2^(row_max - m_new) when some row of the warp
// moved (warp-uniform branch; rescale is then also 1 for the rows that did not); row_max becomes
// m_new. m_base may be row_max itself.
template <class AccS, class PReg, class AccO>
__device__ __forceinline__ void online_softmax_update(AccS& acc_s, PReg& p_reg, AccO& acc_o, float scale_log2,
                                                      const float m_base[2], float row_max[2], float row_sum[2],
                                                      float seen_max[2], float m_new[2], float rescale[2]) {
  float m_use[2];
  CUTLASS_PRAGMA_UNROLL
  for (int h = 0; h < 2; ++h) {
    float mx = -INFINITY;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 2 * h; i < size(acc_s); i += 4) mx = fmaxf(mx, fmaxf(acc_s(i), acc_s(i + 1)));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    mx *= scale_log2;
    seen_max[h] = fmaxf(seen_max[h], mx);
    m_new[h] = lazy_max(m_base[h], mx, kRescaleThreshold);
    // A row with no valid key yet keeps m = -inf; subtracting 0 keeps its terms exactly 0.
    m_use[h] = m_new[h] == -INFINITY ? 0.f : m_new[h];
    rescale[h] = m_new[h] == row_max[h] ? 1.f : ptx::exp2_approx(row_max[h] - m_use[h]);
  }
  const bool rescaled = __any_sync(0xffffffffu, rescale[0] != 1.f || rescale[1] != 1.f);
  if (rescaled) {
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc_o); ++i) acc_o(i) *= rescale[(i / 2) % 2];
  }
  CUTLASS_PRAGMA_UNROLL
  for (int h = 0; h < 2; ++h) {
    const float neg_m = -m_use[h];
    float sum = 0.f;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 2 * h; i < size(acc_s); i += 4) {
      acc_s(i) = ptx::exp2_approx(fmaf(acc_s(i), scale_log2, neg_m));
      acc_s(i + 1) = ptx::exp2_approx(fmaf(acc_s(i + 1), scale_log2, neg_m));
      p_reg(i) = bf16(acc_s(i));
      p_reg(i + 1) = bf16(acc_s(i + 1));
      sum += acc_s(i) + acc_s(i + 1);
    }
    row_sum[h] = row_sum[h] * rescale[h] + sum;
    row_max[h] = m_new[h];
  }
}

// One consumer warpgroup (kWg = 0 or 1) from Q's arrival to its output half for one query row:
// runs the n_steps steps (two 64-key blocks each) that the producer fills, combines the row sums of
// both consumers and hands the unnormalized output to `epilogue(acc_o, row_max, row_sum, true_max)`:
// acc_o the 64 x 256 fp32 accumulator of channels 256 kWg.., row_max (the sums' reference: lazy, up
// to 8 below the true max) / row_sum / true_max per accumulator row half (acc_row), log2 units;
// row_sum is 0 for a row without a valid key (row_max and true_max are then -inf).
// kPair: the CTA is one of a 2-CTA cluster (a query's two head blocks) whose producers each gather
// half of every block for both CTAs (sparse_mla_prefill_sm90.cuh), so freeing a region also tells
// the peer (one arrival per warp on its `empty`): its producer gathers into its own copy only once
// both CTAs' readers are done with the half it sends here.
template <int kDqk, int kWg, bool kPair, class Epilogue>
__device__ __forceinline__ void consume(float sm_scale, typename SparseMlaSm90Config<kDqk>::Smem& sm, int n_steps,
                                        Epilogue&& epilogue) {
  using C = SparseMlaSm90Config<kDqk>;
  using MmaQK = typename C::MmaQK;
  using MmaPVReg = typename C::MmaPVReg;
  using MmaPVSmem = typename C::MmaPVSmem;
  constexpr bool wg1 = kWg == 1;
  constexpr int wg = kWg;
  const int t = threadIdx.x % 128;
  constexpr int kTiles = C::kTiles, kLeft = C::kLeftTiles;
  const float scale_log2 = sm_scale * sink::kLog2e;

  Tensor acc_s = partition_fragment_C(MmaQK{}, Shape<_64, _64>{});            // S, then P (fp32)
  Tensor p_reg = make_tensor<bf16>(partition_shape_A(MmaPVReg{}, Shape<_64, _64>{}));  // P (bf16)
  Tensor acc_o = partition_fragment_C(MmaPVReg{}, Shape<_64, _256>{});        // this WG's O half
  clear(acc_o);
  float row_max[2] = {-INFINITY, -INFINITY};  // rows acc_row(0 / 1), log2 units
  float row_sum[2] = {0.f, 0.f};              // this thread's columns of P only
  float seen_max[2] = {-INFINITY, -INFINITY}; // the true max of this consumer's logits (log2 units)

  auto sP_of = [&](int c) {  // P_c's shared tile
    bf16* ptr = (C::kP0InRope && c == 0) ? sm.kv[0] + 64 * 512 : sm.p[C::kP0InRope ? 0 : c];
    return make_tensor(make_smem_ptr(ptr), typename C::template Tiles<1>{});
  };
  // V of buffer `buf`, this consumer's 256 channels.
  auto sV_of = [&](int buf) {
    return make_tensor(make_smem_ptr(sm.kv[buf] + (wg1 ? 64 * 256 : 0)), typename C::template ValueView<4>{});
  };
  auto qk_tiles = [&](int tile_begin, int tile_end, bool clear_first) {
    const int buf = wg;
    CUTLASS_PRAGMA_UNROLL
    for (int tile = tile_begin; tile < tile_end; ++tile) {
      auto sQt = make_tensor(make_smem_ptr(sm.q + tile * 4096), typename C::template Tiles<1>{});
      auto sKt = make_tensor(make_smem_ptr(sm.kv[buf] + tile * 4096), typename C::template Tiles<1>{});
      wgmma_ss(MmaQK{}, sQt, sKt, acc_s, clear_first && tile == tile_begin, t);
    }
  };
  // S_c = Q K_c^T: WG0 reads region L first, WG1 region R first (the producer's order).
  // kPair with P_0 in buffer 0's RoPE tile: this CTA's half of that tile is also the source of a
  // bulk copy to the peer, which signals only the peer's `ready`. So once WG0 has waited for its
  // `ready[0][1]` (the peer's half, sent from the peer's RoPE tile, is in), it tells the peer
  // (p0_free), and WG0 writes P_0 over the tile only after the peer said so for this step.
  constexpr bool kP0Handshake = kPair && C::kP0InRope;
  auto ready_0r_seen = [&] {
    if constexpr (kP0Handshake)
      if (t == 0) arrive_on_peer(sm.p0_free);
  };
  auto issue_qk = [&](int phase) {
    constexpr int first = wg1 ? 1 : 0;
    sm.ready[wg][first].wait(phase);
    if constexpr (first == 0) qk_tiles(0, kLeft, true); else qk_tiles(kLeft, kTiles, true);
    sm.ready[wg][first ^ 1].wait(phase);
    if constexpr (!wg1) ready_0r_seen();
    if constexpr (first == 0) qk_tiles(kLeft, kTiles, false); else qk_tiles(0, kLeft, false);
    warpgroup_commit_batch();
  };
  // Masked keys -> -inf (raw logits: the scale is folded into the exponent), in place.
  auto mask = [&](int phase) {
    sm.valid_ready[wg].wait(phase);
    if constexpr (kPrefillMaskVote) {  // a block whose 64 keys are all valid needs no select
      const int lane = t % 32;
      if (__all_sync(0xffffffffu, sm.valid[wg][lane] & sm.valid[wg][lane + 32])) return;
    }
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc_s); ++i) acc_s(i) = sm.valid[wg][acc_col(i, t)] ? acc_s(i) : -INFINITY;
  };
  // P = 2^(S - m_new) for m_new = lazy_max(m_base, row max of S); O and l rescaled from row_max.
  auto softmax = [&](const float m_base[2], float m_new[2]) {
    float rescale[2];
    online_softmax_update(acc_s, p_reg, acc_o, scale_log2, m_base, row_max, row_sum, seen_max, m_new, rescale);
  };
  auto publish_max = [&](const float m[2]) {
    __syncwarp();  // the quad's other threads have read the previous value
    if (t % 4 == 0) sm.row_max[t / 4] = make_float2(m[0], m[1]);
  };

  sm.q_ready.wait(0);
  if (n_steps > 0) {
    issue_qk(0);
    warpgroup_wait<0>();
  }
  for (int step = 0; step < n_steps; ++step) {
    const int phase = step & 1;
    const bool more = step + 1 < n_steps;
    mask(phase);
    if constexpr (!wg1) {
      float m0[2];
      softmax(row_max, m0);
      publish_max(m0);
      bar_arrive(kMax0Ready, 256);
      wgmma_rs(MmaPVReg{}, p_reg, sV_of(0), acc_o, t);  // O_0 += P_0 V_0[L]
      warpgroup_commit_batch();
      warpgroup_wait<0>();
      release_buffer<kPair>(sm.empty[0][0]);
      bar_sync(kMax1Ready, 256);
      const float2 m1 = sm.row_max[t / 4];
      const float m1v[2] = {m1.x, m1.y};
      // P_0, O_0 and l to m1; with lazy rescaling m1 is m0 almost always, and p_reg still holds
      // P_0 (the RS wgmma only read it).
      float factor[2];
      CUTLASS_PRAGMA_UNROLL
      for (int h = 0; h < 2; ++h) {
        factor[h] = m1v[h] == m0[h] ? 1.f : ptx::exp2_approx(m0[h] - (m1v[h] == -INFINITY ? 0.f : m1v[h]));
        row_max[h] = m1v[h];
        row_sum[h] *= factor[h];
      }
      const bool moved = __any_sync(0xffffffffu, factor[0] != 1.f || factor[1] != 1.f);
      if (moved) {
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(acc_s); ++i) p_reg(i) = bf16(acc_s(i) * factor[(i / 2) % 2]);
      }
      auto sP0 = sP_of(0);
      if constexpr (kP0Handshake) sm.p0_free.wait(phase);  // the peer has our half of this step's RoPE tile
      store_tile_stmatrix<MmaQK>(p_reg, sP0, t);
      cutlass::arch::fence_view_async_shared();  // generic-proxy stores -> the peer's wgmma reads
      bar_arrive(kP0Ready, 256);
      if (moved) {
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(acc_o); ++i) acc_o(i) *= factor[(i / 2) % 2];
      }
      bar_sync(kP1Ready, 256);
      wgmma_ss(MmaPVSmem{}, sP_of(1), sV_of(1), acc_o, false, t);  // O_0 += P_1 V_1[L]
      warpgroup_commit_batch();
      if (more) {
        // The next S_0 while P_1 V_1[L] runs; 0L/0R were refilled once WG0 and WG1 freed them.
        sm.ready[0][0].wait(phase ^ 1);
        qk_tiles(0, kLeft, true);
        warpgroup_commit_batch();
        warpgroup_wait<1>();
        release_buffer<kPair>(sm.empty[1][0]);
        sm.ready[0][1].wait(phase ^ 1);
        ready_0r_seen();
        qk_tiles(kLeft, kTiles, false);
        warpgroup_commit_batch();
        warpgroup_wait<0>();
      } else {
        warpgroup_wait<0>();
        release_buffer<kPair>(sm.empty[1][0]);
      }
    } else {
      bar_sync(kMax0Ready, 256);
      const float2 m0 = sm.row_max[t / 4];
      const float m0v[2] = {fmaxf(m0.x, row_max[0]), fmaxf(m0.y, row_max[1])};
      float m1[2];
      softmax(m0v, m1);
      publish_max(m1);
      bar_arrive(kMax1Ready, 256);
      wgmma_rs(MmaPVReg{}, p_reg, sV_of(1), acc_o, t);  // O_1 += P_1 V_1[R]
      warpgroup_commit_batch();
      auto sP1 = sP_of(1);
      store_tile_stmatrix<MmaQK>(p_reg, sP1, t);
      cutlass::arch::fence_view_async_shared();
      bar_arrive(kP1Ready, 256);
      bar_sync(kP0Ready, 256);
      wgmma_ss(MmaPVSmem{}, sP_of(0), sV_of(0), acc_o, false, t);  // O_1 += P_0 V_0[R]
      warpgroup_commit_batch();
      warpgroup_wait<1>();
      release_buffer<kPair>(sm.empty[1][1]);
      warpgroup_wait<0>();
      release_buffer<kPair>(sm.empty[0][1]);  // also frees P_0 when it sits in buffer 0's RoPE tile
      if (more) {
        issue_qk(phase ^ 1);
        warpgroup_wait<0>();
      }
    }
  }

  // ---- the row sums and true maxes of both consumers (the same order in both), the epilogue ----
  CUTLASS_PRAGMA_UNROLL
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
  }
  if (t % 4 == 0) sm.row_stats[wg][t / 4] = make_float4(row_sum[0], row_sum[1], seen_max[0], seen_max[1]);
  bar_sync(kSumReady, 256);
  const float4 s0 = sm.row_stats[0][t / 4], s1 = sm.row_stats[1][t / 4];  // same order in both WGs
  const float total[2] = {s0.x + s1.x, s0.y + s1.y};
  const float true_max[2] = {fmaxf(s0.z, s1.z), fmaxf(s0.w, s1.w)};
  epilogue(acc_o, row_max, total, true_max);
}

// The null-sink finish of this thread's two accumulator rows (heads head0 + acc_row(h)): out scale,
// lse and max logit per row (row_max: the sums' reference, true_max: the rows' largest logit, log2
// units); a row without a valid key (row_sum 0) is the empty row.
__device__ __forceinline__ void finish_rows(const float row_max[2], const float total[2], const float true_max[2],
                                            const float* sinks, int head0, int h_q, sink::RowFinish (&f)[2]) {
  const int t = threadIdx.x % 128;
  CUTLASS_PRAGMA_UNROLL
  for (int h = 0; h < 2; ++h) {
    const float m = total[h] == 0.f ? -INFINITY : row_max[h];
    f[h] = sink::NullSink::finish(m, total[h], sink::load_log2(sinks, min(head0 + acc_row(h, t), h_q - 1)));
    if (total[h] != 0.f) f[h].max_logit = true_max[h] * sink::kLn2;
  }
}

// The epilogue's store of one consumer's bf16 output half: rows scaled by out_scale[acc row half],
// staged in `stage` (64 x 256 bf16 of shared memory: this consumer's half of the prefill's Q
// buffer once every QK is done, or of the decode's last KV buffer), then stored as whole 512-byte rows. `out` points at row 0's first channel of this
// half; rows >= n_rows are not stored. Stage: [64 rows][256 channels], the 16-byte chunks of a row
// XOR-swizzled by row % 8 so that neither side has bank conflicts.
template <int kWg, class Acc>
__device__ __forceinline__ void store_output_half(bf16* stage, const Acc& acc_o, const float out_scale[2], bf16* out,
                                                  int64_t row_stride, int n_rows) {
  const int t = threadIdx.x % 128;
  auto staged = [&](int row, int chunk) { return stage + row * 256 + ((chunk ^ (row & 7)) * 8); };
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < size(acc_o); i += 2) {
    const int h = (i / 2) % 2, row = acc_row(h, t), col = acc_col(i, t);
    *reinterpret_cast<__nv_bfloat162*>(staged(row, col / 8) + col % 8) =
        __floats2bfloat162_rn(acc_o(i) * out_scale[h], acc_o(i + 1) * out_scale[h]);
  }
  bar_sync(kOut0Staged + kWg, 128);
  CUTLASS_PRAGMA_UNROLL
  for (int pass = 0; pass < 16; ++pass) {  // a warp stores one row's 512 bytes per pass
    const int row = pass * 4 + t / 32, chunk = t % 32;
    if (row < n_rows)
      *reinterpret_cast<uint4*>(out + row * row_stride + chunk * 8) = *reinterpret_cast<const uint4*>(staged(row, chunk));
  }
}

// Q in and the output out by TMA: q [rows, h_q, d_qk] (the decode's [b, s_q, h_q, d_qk]) and out
// [rows, h_q, 512], boxes of 64 columns x 64 heads (x 1 row) in the 128-byte swizzle, the q
// buffer's tile layout; heads past h_q read as zeros and are not written. Both streams pass through
// L2 once, so they go with an evict_first policy and leave the KV that every CTA gathers in L2
// (bench/NOTES.md "Prefill v1.6": DRAM reads -17 %, V4-Flash -4.5 %). q_ok == 0 / out_ok == 0 (a
// stride or address TMA cannot take, or SINKOPS_WA90_TMA=0): the producer's cp.async loads Q / the
// threads store the output (store_output_half).
struct SparseMlaMaps {
  CUtensorMap out, q;
  int out_ok, q_ok;
};

// store_output_half by TMA: output channels 256 kWg + 64 j.. as tile 4 kWg + j of `stage` (a
// [64, >= 512] buffer in the C::Tiles layout that nothing reads any more: the prefill's q buffer
// once every QK is done, the decode's last KV buffer), then one thread's four stores at (channel,
// head0, row) of maps.out, which waits for their reads (the buffer is reused, or the CTA ends).
template <class C, int kWg, class Acc>
__device__ __forceinline__ void store_output_half_by_tma(bf16* stage, const Acc& acc_o, const float out_scale[2],
                                                         const SparseMlaMaps& maps, int head0, int row) {
  const int t = threadIdx.x % 128;
  Tensor tile = make_tensor<bf16>(partition_shape_A(typename C::MmaPVReg{}, Shape<_64, _64>{}));  // 64 x 64 bf16
  CUTLASS_PRAGMA_UNROLL
  for (int j = 0; j < 4; ++j) {
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(tile); ++i) tile(i) = bf16(acc_o(j * size(tile) + i) * out_scale[(i / 2) % 2]);
    auto sT = make_tensor(make_smem_ptr(stage + (4 * kWg + j) * 4096), typename C::template Tiles<1>{});
    store_tile_stmatrix<typename C::MmaQK>(tile, sT, t);
  }
  cutlass::arch::fence_view_async_shared();  // generic-proxy stores -> the TMA's reads
  bar_sync(kOut0Staged + kWg, 128);
  if (t == 0) {
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < 4; ++j)
      tma_store_3d(maps.out, cast_smem_ptr_to_uint(stage + (4 * kWg + j) * 4096), 256 * kWg + 64 * j, head0, row,
                   l2_evict_first_policy());
    tma_store_arrive();
    tma_store_wait<0>();
  }
}

}  // namespace sinkops::cuda::sm90
