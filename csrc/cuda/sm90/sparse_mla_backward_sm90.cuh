// The backward of sparse MLA prefill with the null-logit sink on Hopper (sm_90a), two kernels per
// chunk of queries as the Triton backward (docs/DESIGN.md §6 for the math; bench/NOTES.md "Sparse
// backward, sm90" for the plan and the numbers). Row terms (per query and head): D = <dO, O>,
// r = 1 - p_sink = sigmoid(lse - s), delta = r D - dlse; per valid key x of the row:
// Q = 2^(S c - lse log2 e) (c = sm_scale log2 e), P = r Q, dX = Q (r dP - delta), dP = <dO, v_x>.
//
// * dq kernel: one CTA per (query, 64 heads) as the forward's (sparse_mla_sm90_consumer.cuh), with
//   dq in place of O. WG2 (producer) loads Q and dO once, gathers 32-key blocks (block 2s into
//   buffer 0, 2s+1 into buffer 1, each buffer in regions L = tiles 0..3 and R = the rest) and
//   computes the row terms while step 0's rows fly. Consumer c computes S_c = Q K_c^T and
//   dP_c = dO V_c^T for its buffer (64 heads x 32 keys), P and dX, stages r Q and scale dX in bf16
//   ([chunk rows, h_q, stage_topk]) for the dkv kernel, and adds dX K into its half of dq:
//   WG0 channels 0..255 (region L), WG1 256..d_qk-1 (region R); its own block from registers (RS),
//   the other consumer's dX through shared memory (SS). Shared memory: Q 72 KB + dO 64 KB + two
//   32-key buffers 72 KB + the two dX tiles 8 KB (two 64-key buffers would not fit).
// * dkv kernel: one CTA (two warpgroups, 64 index positions each) per (128 positions, query), the
//   CTAs in groups of queries over sorted indices (dkv_query_position_block): the key gradients
//   g = scale dX^T q + P^T dO ([64 positions, d_qk] a warpgroup, the head sum is the MMA's K), 64
//   channels at a time, staged in shared memory and added into dkv_acc[index] by bulk reductions
//   (cp.reduce.async.bulk, one 256-byte row a position and chunk, beside the next chunk's products;
//   or, deterministic, stored per (query, position) for the caller's ordered sum). Invalid positions
//   add nothing.
#pragma once
#include <cuda_bf16.h>

#include "sinkops/sparse_mla_backward_params.h"
#include "../mma_sm80.cuh"  // ptx::exp2_approx
#include "../sink_policy.cuh"  // sink::kLog2e
#include "wgmma.cuh"

namespace sinkops::cuda::sm90 {

template <int kDqk>
struct SparseMlaBwdDqConfig {
  static_assert(kDqk == 512 || kDqk == 576, "v4 (512) and v32 (576) rows");
  static constexpr int kHeads = 64;      // rows of every wgmma
  static constexpr int kBlockKeys = 32;  // keys per block, one block per consumer per step
  static constexpr int kDv = 512;
  static constexpr int kTiles = kDqk / 64;  // 64-channel tiles of a row: 8 or 9
  static constexpr int kVTiles = kDv / 64;  // the tiles dP reads
  static constexpr int kLeftTiles = 4;      // region L: tiles 0..3 = WG0's dq channels
  static constexpr int kThreads = 384;
  // setmaxnreg moves registers within the block's launch allocation, 384 x 168 = 64512 (ptxas's count
  // at __launch_bounds__(384, 1)): 2 x 128 x 232 + 128 x 40 = 64512. More would leave a consumer
  // warp waiting in setmaxnreg.inc forever.
  static constexpr int kConsumerRegs = 232, kProducerRegs = 40;

  // [rows, 64 T] bf16, K-major, 128-byte swizzle; tile t (channels 64t..) contiguous at 64 rows x 64 t.
  template <int T>
  using QTiles = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<bf16>{}, Shape<_64, Int<64 * T>>{}, Step<_1, _2>{}));
  template <int T>
  using KTiles = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<bf16>{}, Shape<_32, Int<64 * T>>{}, Step<_1, _2>{}));
  // The [64 T channels, 32 keys] view of a key buffer's tiles (MN-major) for dq += dX K.
  template <int T>
  using KeyChannels = decltype(composition(KTiles<T>{}, Layout<Shape<Int<64 * T>, _32>, Stride<_32, _1>>{}));
  // A consumer's dX [64 heads, 32 keys], K-major, the A operand of the other consumer's dq product.
  using DxTile = decltype(tile_to_shape(GMMA::Layout_K_SW64_Atom<bf16>{}, Shape<_64, _32>{}));

  using MmaS = decltype(make_tiled_mma(GMMA::MMA_64x32x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>{}));
  using MmaDqReg = decltype(make_tiled_mma(GMMA::MMA_64x256x16_F32BF16BF16_RS<GMMA::Major::K, GMMA::Major::MN>{}));
  using MmaDqSmem = decltype(make_tiled_mma(GMMA::MMA_64x256x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::MN>{}));
  using MmaRopeReg = decltype(make_tiled_mma(GMMA::MMA_64x64x16_F32BF16BF16_RS<GMMA::Major::K, GMMA::Major::MN>{}));
  using MmaRopeSmem = decltype(make_tiled_mma(GMMA::MMA_64x64x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::MN>{}));
  static constexpr bool kRope = kDqk == 576;  // WG1's dq also holds the 64 RoPE channels (tile 8)

  struct Smem {
    alignas(1024) bf16 q[kHeads * kDqk];                // [64 heads, d_qk] QTiles<kTiles>
    alignas(1024) bf16 dout[kHeads * kDv];              // [64 heads, 512]  QTiles<kVTiles>
    alignas(1024) bf16 kv[2][kBlockKeys * kDqk];        // [2][32 keys, d_qk] KTiles<kTiles>
    alignas(1024) bf16 dx[2][kHeads * kBlockKeys];      // [2][64 heads, 32 keys] DxTile: dX of consumer c
    float lse2[kHeads], r[kHeads], delta[kHeads];       // the row terms (lse2 = lse log2 e; +inf: no row)
    int32_t valid[2][kBlockKeys];                       // per buffer: key gathered (1) or masked (0)
    Barrier q_ready, rows_ready;
    Barrier ready[2][2], empty[2][2];  // [buffer][region L, R]
    Barrier valid_ready[2];            // [buffer]
  };
  static constexpr int kSmemBytes = sizeof(Smem);
};

// Named barriers (0 is __syncthreads): consumer c's dX tile is in shared memory (c arrives, the
// other consumer waits; 256 threads). Each is used once per step; a step's producer hand-overs order
// the other consumer's read of dx[c] before c overwrites it (see the kernel).
enum SparseMlaBwdBarrier : int { kDx0Ready = 1, kDx1Ready = 2 };

// Consumer kWg of the dq kernel (the kernel's header comment): n_steps steps of two 32-key blocks,
// then its half of dq. Templated on kWg so that every wgmma is issued outside a runtime branch.
template <int kDqk, int kWg>
__device__ __forceinline__ void dq_consumer(const SparseMlaBackwardParams& p, typename SparseMlaBwdDqConfig<kDqk>::Smem& sm,
                                            int64_t q_idx, int64_t row_in_chunk, int head0, int n_steps) {
  using C = SparseMlaBwdDqConfig<kDqk>;
  using MmaS = typename C::MmaS;
  constexpr int kTiles = C::kTiles, kLeft = C::kLeftTiles, kVTiles = C::kVTiles, kKeys = C::kBlockKeys;
  constexpr int c = kWg, o = kWg ^ 1;  // this consumer's buffer and region; the other's
  const int t = threadIdx.x % 128;
  const float scale_log2 = p.sm_scale * sink::kLog2e;
  Tensor acc_s = partition_fragment_C(MmaS{}, Shape<_64, Int<kKeys>>{});   // S: raw logits
  Tensor acc_dp = partition_fragment_C(MmaS{}, Shape<_64, Int<kKeys>>{});  // dP
  Tensor dx_reg = make_tensor<bf16>(partition_shape_A(typename C::MmaDqReg{}, Shape<_64, Int<kKeys>>{}));
  Tensor acc_dq = partition_fragment_C(typename C::MmaDqReg{}, Shape<_64, _256>{});     // channels 256 c..
  Tensor acc_rope = partition_fragment_C(typename C::MmaRopeReg{}, Shape<_64, _64>{});  // WG1, d_qk 576: 512..575
  constexpr bool kRope = C::kRope && c == 1;
  clear(acc_dq);
  if constexpr (kRope) clear(acc_rope);

  auto sK_tile = [&](int tile) {
    return make_tensor(make_smem_ptr(sm.kv[c] + tile * 2048), typename C::template KTiles<1>{});
  };
  // S_c and dP_c over the tiles [begin, end) of buffer c (dP over the value tiles among them).
  auto sdp_tiles = [&](auto begin, auto end, bool clear_first) {
    CUTLASS_PRAGMA_UNROLL
    for (int tile = begin; tile < end; ++tile) {
      auto sQt = make_tensor(make_smem_ptr(sm.q + tile * 4096), typename C::template QTiles<1>{});
      wgmma_ss(MmaS{}, sQt, sK_tile(tile), acc_s, clear_first && tile == begin, t);
      if (tile < kVTiles) {  // compile time once unrolled
        auto sDt = make_tensor(make_smem_ptr(sm.dout + tile * 4096), typename C::template QTiles<1>{});
        wgmma_ss(MmaS{}, sDt, sK_tile(tile), acc_dp, clear_first && tile == begin, t);
      }
    }
  };
  // dq[this consumer's channels] += dX K over buffer `buf`'s keys.
  auto key_channels = [&](int buf) {
    return make_tensor(make_smem_ptr(sm.kv[buf] + c * kLeft * 2048), typename C::template KeyChannels<4>{});
  };
  auto rope_channels = [&](int buf) {
    return make_tensor(make_smem_ptr(sm.kv[buf] + 8 * 2048), typename C::template KeyChannels<1>{});
  };
  auto sDx_other = make_tensor(make_smem_ptr(sm.dx[o]), typename C::DxTile{});

  float lse2[2], rr[2], delta[2];
  sm.q_ready.wait(0);
  const int stage_ld = p.stage_topk;
  const int64_t stage_head0 = (row_in_chunk * p.h_q + head0) * stage_ld;  // [chunk rows, h_q, stage_topk]
  for (int step = 0; step < n_steps; ++step) {
    const int phase = step & 1;
    // S_c, dP_c: this consumer's region of buffer c first (the producer's order)
    sm.ready[c][c].wait(phase);
    if constexpr (c == 0) sdp_tiles(Int<0>{}, Int<kLeft>{}, true); else sdp_tiles(Int<kLeft>{}, Int<kTiles>{}, true);
    sm.ready[c][o].wait(phase);
    if constexpr (c == 0) sdp_tiles(Int<kLeft>{}, Int<kTiles>{}, false); else sdp_tiles(Int<0>{}, Int<kLeft>{}, false);
    warpgroup_commit_batch();
    warpgroup_wait<0>();

    if (step == 0) {  // the row terms: the producer computed them while the first products ran
      sm.rows_ready.wait(0);
      CUTLASS_PRAGMA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int r = acc_row(h, t);
        lse2[h] = sm.lse2[r];
        rr[h] = sm.r[r];
        delta[h] = sm.delta[r];
      }
    }
    // P and dX (masked keys and rows without keys: 0), the bf16 stages of keys < stage_topk
    sm.valid_ready[c].wait(phase);
    const int key0 = (2 * step + c) * kKeys;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc_s); i += 2) {
      const int h = (i / 2) % 2, col = acc_col(i, t), row = acc_row(h, t);
      float pq[2], dx[2];
      CUTLASS_PRAGMA_UNROLL
      for (int e = 0; e < 2; ++e) {
        pq[e] = sm.valid[c][col + e] ? ptx::exp2_approx(fmaf(acc_s(i + e), scale_log2, -lse2[h])) : 0.f;
        dx[e] = pq[e] * (rr[h] * acc_dp(i + e) - delta[h]);
        dx_reg(i + e) = bf16(dx[e]);
      }
      const int key = key0 + col;
      if (key < stage_ld && head0 + row < p.h_q) {
        const int64_t at = stage_head0 + int64_t(row) * stage_ld + key;
        *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(p.p_stage) + at) =
            __floats2bfloat162_rn(pq[0] * rr[h], pq[1] * rr[h]);
        *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(p.dx_stage) + at) =
            __floats2bfloat162_rn(dx[0] * p.sm_scale, dx[1] * p.sm_scale);
      }
    }
    // dX_c for the other consumer: its read of the previous step's tile ended before the producer
    // refilled the region this consumer waited for above (empty[c][o] -> ready[c][o]).
    auto sDx = make_tensor(make_smem_ptr(sm.dx[c]), typename C::DxTile{});
    store_tile_stmatrix<MmaS>(dx_reg, sDx, t);
    cutlass::arch::fence_view_async_shared();  // generic-proxy stores -> the peer's wgmma reads
    bar_arrive(c == 0 ? kDx0Ready : kDx1Ready, 256);
    wgmma_rs(typename C::MmaDqReg{}, dx_reg, key_channels(c), acc_dq, t);  // own block, from registers
    if constexpr (kRope) wgmma_rs(typename C::MmaRopeReg{}, dx_reg, rope_channels(c), acc_rope, t);
    warpgroup_commit_batch();
    bar_sync(c == 0 ? kDx1Ready : kDx0Ready, 256);
    wgmma_ss(typename C::MmaDqSmem{}, sDx_other, key_channels(o), acc_dq, false, t);  // the other's block
    if constexpr (kRope) wgmma_ss(typename C::MmaRopeSmem{}, sDx_other, rope_channels(o), acc_rope, false, t);
    warpgroup_commit_batch();
    warpgroup_wait<1>();
    sm.empty[c][c].arrive();  // buffer c, this consumer's region: its S / dP and dq reads are done
    warpgroup_wait<0>();
    sm.empty[o][c].arrive();  // buffer o, this consumer's region (its owner's S / dP preceded dX_o)
  }

  // ---- dq = scale sum dX k: bf16 pairs straight from the accumulators ----
  bf16* dq = static_cast<bf16*>(p.dq) + q_idx * p.dq_row_stride + int64_t(head0) * p.dq_head_stride + c * 256;
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < size(acc_dq); i += 2) {
    const int row = acc_row((i / 2) % 2, t), col = acc_col(i, t);
    if (head0 + row < p.h_q)
      *reinterpret_cast<__nv_bfloat162*>(dq + row * p.dq_head_stride + col) =
          __floats2bfloat162_rn(acc_dq(i) * p.sm_scale, acc_dq(i + 1) * p.sm_scale);
  }
  if constexpr (kRope) {
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc_rope); i += 2) {
      const int row = acc_row((i / 2) % 2, t), col = acc_col(i, t);
      if (head0 + row < p.h_q)
        *reinterpret_cast<__nv_bfloat162*>(dq + row * p.dq_head_stride + 256 + col) =
            __floats2bfloat162_rn(acc_rope(i) * p.sm_scale, acc_rope(i + 1) * p.sm_scale);
    }
  }
}

// One CTA = one query row x 64 heads. grid: (chunk_rows, head blocks); block 384; dynamic smem: Smem.
template <int kDqk>
__global__ void __launch_bounds__(384, 1) sparse_mla_bwd_dq_sm90_kernel(const __grid_constant__ SparseMlaBackwardParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = SparseMlaBwdDqConfig<kDqk>;
  constexpr int kTiles = C::kTiles, kLeft = C::kLeftTiles, kVTiles = C::kVTiles, kKeys = C::kBlockKeys;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<typename C::Smem*>(smem_raw);

  const int64_t row_in_chunk = blockIdx.x;
  const int64_t q_idx = p.s0 + row_in_chunk;
  const int head0 = blockIdx.y * C::kHeads;
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;

  int n_keys = p.topk;
  if (p.topk_length != nullptr) n_keys = min(max(p.topk_length[q_idx], 0), p.topk);
  const int n_steps = (n_keys + 2 * kKeys - 1) / (2 * kKeys);

  if (threadIdx.x == 0) {
    sm.q_ready.init(128);     // every producer thread's cp.async arrival (Q and dO)
    sm.rows_ready.init(128);  // every producer thread, once the row terms are in shared memory
    for (int b = 0; b < 2; ++b) {
      for (int r = 0; r < 2; ++r) {
        sm.ready[b][r].init(128);  // every producer thread's cp.async arrival
        sm.empty[b][r].init(128);  // the consumer that reads the region last
      }
      sm.valid_ready[b].init(16);  // the 16 producer threads that write the flags
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  if (wg == 2) {
    // ======================= producer =======================
    cutlass::arch::warpgroup_reg_dealloc<C::kProducerRegs>();
    const int chunk = t % 8;  // 16-byte chunk of a 128-byte tile row
    const int row0 = t / 8;   // rows row0 + 16 j: j < 4 of Q / dO, j < 2 of a key block
    // Rows row0 + 16 j share row0's swizzle phase (it repeats every 8 rows), so one swizzled base
    // address serves every row and tile of this thread (64-row tiles: 4096 apart, 32-row: 2048).
    auto sQ = make_tensor(make_smem_ptr(sm.q), typename C::template QTiles<kTiles>{});
    bf16* const q_dst = &sQ(row0, chunk * 8);
    bf16* const do_dst = q_dst - sm.q + sm.dout;
    bf16* const kv_dst = q_dst - sm.q + sm.kv[0];
    {
      const bf16* q_rows = static_cast<const bf16*>(p.q) + q_idx * p.q_row_stride;
      const bf16* do_rows = static_cast<const bf16*>(p.dout) + q_idx * p.dout_row_stride;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int r = row0 + 16 * j;
        const bool ok = head0 + r < p.h_q;  // heads past h_q: zero rows, never stored
        const int64_t h = ok ? head0 + r : 0;
#pragma unroll
        for (int tile = 0; tile < kTiles; ++tile)
          cp_async_16_zfill_l2(q_dst + j * 1024 + tile * 4096, q_rows + h * p.q_head_stride + chunk * 8 + tile * 64, ok);
#pragma unroll
        for (int tile = 0; tile < kVTiles; ++tile)
          cp_async_16_zfill_l2(do_dst + j * 1024 + tile * 4096, do_rows + h * p.dout_head_stride + chunk * 8 + tile * 64,
                               ok);
      }
      cp_async_arrive(sm.q_ready);
    }

    // The row terms of head head0 + t / 2 (two threads a head, 256 channels each), read from global
    // memory while the first step's rows are in flight; -> shared memory, dsink_rows.
    auto row_terms = [&]() {
      const int r = t / 2, half = t % 2, head = head0 + r;
      const bool live = head < p.h_q;
      const int64_t sh = q_idx * p.h_q + head;  // lse, dlse, dsink_rows: dense [s_q, h_q]
      const float lse = live ? p.lse[sh] : INFINITY;
      const bool seen = lse != INFINITY;
      float d = 0.f;
      if (live && seen) {
        const bf16* o = static_cast<const bf16*>(p.out) + q_idx * p.out_row_stride + head * p.out_head_stride + half * 256;
        const bf16* g = static_cast<const bf16*>(p.dout) + q_idx * p.dout_row_stride + head * p.dout_head_stride + half * 256;
#pragma unroll 1  // 40 registers: unrolled, the loads spill
        for (int c = 0; c < 32; ++c) {
          const uint4 ov = reinterpret_cast<const uint4*>(o)[c], gv = reinterpret_cast<const uint4*>(g)[c];
          const __nv_bfloat162* o2 = reinterpret_cast<const __nv_bfloat162*>(&ov);
          const __nv_bfloat162* g2 = reinterpret_cast<const __nv_bfloat162*>(&gv);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float2 of = __bfloat1622float2(o2[e]), gf = __bfloat1622float2(g2[e]);
            d = fmaf(of.x, gf.x, fmaf(of.y, gf.y, d));
          }
        }
      }
      d += __shfl_xor_sync(0xffffffffu, d, 1);
      float rr = seen ? 1.f : 0.f;
      if (p.attn_sink != nullptr && live) {
        // r = sigmoid(lse - s), p_sink = sigmoid(s - lse): exact at s = -inf (r 1) and +inf (r 0)
        const float s = p.attn_sink[head];
        rr = seen ? 1.f / (1.f + exp2f((s - lse) * sink::kLog2e)) : 0.f;
        const float p_sink = seen ? 1.f / (1.f + exp2f((lse - s) * sink::kLog2e)) : 0.f;
        if (half == 0) p.dsink_rows[sh] = -p_sink * d;
      }
      const float g_lse = (p.dlse != nullptr && live && seen) ? p.dlse[sh] : 0.f;
      if (half == 0) {
        sm.lse2[r] = lse * sink::kLog2e;  // +inf: every Q of the row is 0
        sm.r[r] = rr;
        sm.delta[r] = rr * d - g_lse;
      }
      sm.rows_ready.arrive();
    };

    const int32_t* idx_row = p.indices + q_idx * p.indices_row_stride;
    const bf16* kv = static_cast<const bf16*>(p.kv) + chunk * 8;
    const bf16* src[2][2];  // [buffer][j] this thread's chunk of the gathered row
    bool ok[2][2];
    auto copy_region = [&](int buf, int tile_begin, int tile_end) {
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int tile = tile_begin; tile < tile_end; ++tile)
          cp_async_16_zfill_l2(kv_dst + buf * (kKeys * kDqk) + j * 1024 + tile * 2048, src[buf][j] + tile * 64,
                               ok[buf][j]);
    };
    auto publish_valid = [&](int buf) {
      if (chunk == 0) {
#pragma unroll
        for (int j = 0; j < 2; ++j) sm.valid[buf][row0 + 16 * j] = ok[buf][j];
        sm.valid_ready[buf].arrive();
      }
    };

    for (int step = 0; step < n_steps; ++step) {
      const int phase = (step & 1) ^ 1;  // the first wait on each empty barrier passes
#pragma unroll
      for (int buf = 0; buf < 2; ++buf)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int key = (2 * step + buf) * kKeys + row0 + 16 * j;
          const int idx = key < n_keys ? idx_row[key] : -1;
          ok[buf][j] = idx >= 0 && idx < p.s_kv;  // anything else is a masked, zero-filled row
          src[buf][j] = kv + (ok[buf][j] ? (int64_t)idx * p.kv_row_stride : 0);
        }
      // In the order the consumers read them: WG0 needs 0L then 0R, WG1 1R then 1L.
      sm.empty[0][0].wait(phase);
      publish_valid(0);  // WG0 read the previous block 0's flags before freeing 0L
      copy_region(0, 0, kLeft);
      cp_async_arrive(sm.ready[0][0]);
      sm.empty[1][1].wait(phase);
      publish_valid(1);  // WG1 read the previous block 1's flags before freeing 1R
      copy_region(1, kLeft, kTiles);
      cp_async_arrive(sm.ready[1][1]);
      sm.empty[0][1].wait(phase);
      copy_region(0, kLeft, kTiles);
      cp_async_arrive(sm.ready[0][1]);
      sm.empty[1][0].wait(phase);
      copy_region(1, 0, kLeft);
      cp_async_arrive(sm.ready[1][0]);
      if (step == 0) row_terms();
    }
    if (n_steps == 0) row_terms();
    cp_async_wait_all();
    return;
  }

  cutlass::arch::warpgroup_reg_alloc<C::kConsumerRegs>();
  if (wg == 0) dq_consumer<kDqk, 0>(p, sm, q_idx, row_in_chunk, head0, n_steps);
  else dq_consumer<kDqk, 1>(p, sm, q_idx, row_in_chunk, head0, n_steps);
#endif
}

// ------------------------------------------------------------------------------------- dkv

// CTA `cta` of the dkv grid -> (position block, query row in the chunk): groups of
// p.dkv_query_group queries (the last one shorter), in each group the block, then the query; odd
// groups take the blocks backwards (they start on the key range the group before ended on, still in
// L2). 32-bit math: the grid (blocks_per_query x chunk_rows CTAs) is below 2^31 (checked by the
// entry point).
struct DkvCta {
  int block;
  int row_in_chunk;
};
__device__ __forceinline__ DkvCta dkv_query_position_block(const SparseMlaBackwardParams& p, uint32_t cta,
                                                          uint32_t blocks_per_query) {
  const auto rows = static_cast<uint32_t>(p.chunk_rows);
  const auto group_size = static_cast<uint32_t>(min(p.dkv_query_group, p.chunk_rows));
  const uint32_t group = cta / (group_size * blocks_per_query);
  const uint32_t first = group * group_size;
  const uint32_t in_group = min(group_size, rows - first);
  const uint32_t rest = cta - first * blocks_per_query;
  const uint32_t block = rest / in_group;
  return {static_cast<int>(group % 2 ? blocks_per_query - 1 - block : block), static_cast<int>(first + rest % in_group)};
}

template <int kDqk, int kHeadsPad, bool kDeterministic>
struct SparseMlaBwdDkvConfig {
  static_assert(kHeadsPad == 64 || kHeadsPad == 128, "h_q <= 128 (the MMA's K, padded)");
  // Two warpgroups, each on its own 64 positions (the MMA's M), share each q / dO chunk: half the L2
  // reads of q and dO per position of one (1-2 % faster on the dkv kernel, bench/NOTES.md "Sparse backward, dkv v3")
  static constexpr int kWarpgroups = 2;
  static constexpr int kPositions = 64 * kWarpgroups;  // index positions per CTA
  static constexpr int kChunks = kDqk / 64;  // 64-channel output chunks (the MMA's N)
  static constexpr int kVChunks = 8;         // the chunks that also take P^T dO (the rest: RoPE)
  static constexpr int kThreads = 128 * kWarpgroups;
  // [64 (positions or channels), heads] with the 64 contiguous: the MN-major operands of both
  // products (a stage row [h, 64 positions] and a q / dO row [h, 64 channels] are 128-byte rows).
  using Operand = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<bf16>{}, Shape<_64, Int<kHeadsPad>>{}));
  using Mma = decltype(make_tiled_mma(GMMA::MMA_64x64x16_F32BF16BF16_SS<GMMA::Major::MN, GMMA::Major::MN>{}));
  static constexpr int kOperandElems = 64 * kHeadsPad;
  // The sums' way into dkv_acc (kBulkSums: all but the deterministic kernel, which stores its rows):
  // the accumulators staged in shared memory and added row by row (256 bytes a position and chunk)
  // by the TMA unit's bulk reductions, which run beside the next chunk's products. Float2 atomics
  // from the accumulators were 1.12-1.14x slower on the dkv kernel (bench/NOTES.md "Sparse backward,
  // dkv v4").
  static constexpr bool kBulkSums = !kDeterministic;
  // (64 heads: 98 KiB a CTA with one, so two CTAs fit an SM, as many as the registers allow)
  static constexpr int kSumBuffers = kHeadsPad == 128 ? 2 : 1;
  // floats; 288-byte rows: the 4 rows of a half-warp's float2 stores fall in distinct banks, so a
  // warp's store takes 2 wavefronts (272-byte rows: 4)
  static constexpr int kSumRow = 64 + 8;
  struct NoSums {};
  struct Sums {
    alignas(128) float v[kSumBuffers][kWarpgroups][64][kSumRow];  // [buffer][warpgroup][position][channel]
  };
  struct Smem {
    alignas(1024) bf16 dx[kWarpgroups][kOperandElems];  // [warpgroup] scale dX^T [positions, heads]
    alignas(1024) bf16 p[kWarpgroups][kOperandElems];   // [warpgroup] P^T
    alignas(1024) bf16 q[2][kOperandElems];     // [buffer] q[:, chunk] as [channels, heads]
    alignas(1024) bf16 dout[2][kOperandElems];  // [buffer] dO[:, chunk]
    std::conditional_t<kBulkSums, Sums, NoSums> sums;
  };
  static constexpr int kSmemBytes = sizeof(Smem);
};

// grid: (ceil(topk / kPositions) x chunk_rows); block kThreads; dynamic smem: Smem. The CTA index runs
// over groups of dkv_query_group queries, then the position block, then the query in the group
// (dkv_query_position_block): CTAs that run at the same time take the same position block of many
// queries. The caller sorts each query's indices (sinkops/ops/prefill_backward.py), so a position
// block covers about the same key range in every query and the float32 sums those CTAs add into
// stay in L2 (with the block as the fastest index they covered the whole of dkv_acc, larger than
// L2: bench/NOTES.md "Sparse backward, dkv v3").
//
// Written as a rolled loop over the 64-channel chunks with the per-thread addresses computed once:
// the first version unrolled all chunks with CuTe's swizzle and a branch per reduction
// (~9900 SASS instructions, ~160 KB of code run once per CTA) and ran at half the Triton kernel's
// speed with the same tiles (bench/NOTES.md "Sparse backward, sm90, dkv v2").
template <int kDqk, int kHeadsPad, bool kDeterministic>
__global__ void __launch_bounds__(256) sparse_mla_bwd_dkv_sm90_kernel(const __grid_constant__ SparseMlaBackwardParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = SparseMlaBwdDkvConfig<kDqk, kHeadsPad, kDeterministic>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<typename C::Smem*>(smem_raw);
  const int t = threadIdx.x;
  static_assert(C::kThreads == 256, "__launch_bounds__ above");
  const int tw = t % 128, wg = t / 128;  // the thread's index in its warpgroup; which warpgroup
  const DkvCta cta = dkv_query_position_block(p, blockIdx.x, (p.topk + C::kPositions - 1) / C::kPositions);
  const int pos0 = cta.block * C::kPositions;  // the CTA's first position
  const int wpos0 = pos0 + 64 * wg;            // its warpgroup's
  const int64_t row_in_chunk = cta.row_in_chunk;
  const int64_t q_idx = p.s0 + row_in_chunk;
  int n_keys = p.topk;
  if (p.topk_length != nullptr) n_keys = min(max(p.topk_length[q_idx], 0), p.topk);
  if (!kDeterministic && pos0 >= n_keys) return;  // deterministic: a block past n stores its zeros

  // A thread's 16-byte copies into an operand that kLanes threads copy (`lane` its index among them):
  // row k = lane / 8 + m kLanes / 8 (a head), entries 8 (lane % 8).. of the 64 contiguous ones. In the
  // 128-byte swizzle a row is 128 bytes and the swizzle repeats every 8 rows, so copy m lands m kLanes
  // / 8 rows = 16 m kLanes bytes after copy 0. Every operand buffer is 1024-byte aligned (a whole
  // swizzle period), so an offset taken in dx[0] holds in each of them.
  struct Copier {  // one lane's copies: its offset in an operand buffer, its first row, its column
    uint32_t off;
    int k0, j;
  };
  auto copier = [&](int lane) {
    return Copier{static_cast<uint32_t>(reinterpret_cast<const char*>(&make_tensor(
                      make_smem_ptr(sm.dx[0]), typename C::Operand{})(8 * (lane % 8), lane / 8)) -
                  reinterpret_cast<const char*>(sm.dx[0])), lane / 8, lane % 8};
  };
  const Copier stage_copier = copier(tw);
  const Copier chunk_copier = copier(t);
  auto load_rows = [&](bf16* base, const Copier& c, auto lanes, const bf16* src_row0, int64_t head_stride,
                       int valid_from) {
    constexpr int kLanes = decltype(lanes)::value, kCopies = kHeadsPad * 8 / kLanes;
    const uint32_t dst = cast_smem_ptr_to_uint(base) + c.off;
    const bool col_ok = 8 * c.j < valid_from;
    CUTLASS_PRAGMA_UNROLL
    for (int m = 0; m < kCopies; ++m) {
      const int k = c.k0 + m * (kLanes / 8);
      const bool ok = col_ok && k < p.h_q;
      cp_async_16_zfill_l2(dst + m * 16 * kLanes, src_row0 + (ok ? k * head_stride + 8 * c.j : 0), ok);
    }
  };
  // the warpgroup's stages: positions wpos0.. of every head; entries >= n were never written (zeros).
  // (A zero-filled copy reads no byte of its source: warpgroup 1's base may lie past the stage row,
  // e.g. wpos0 192 with stage_topk 136; memcheck runs that case, tools/sanitize_cases.py.)
  const int64_t stage_row = (row_in_chunk * p.h_q) * p.stage_topk + wpos0;
  load_rows(sm.dx[wg], stage_copier, Int<128>{}, static_cast<const bf16*>(p.dx_stage) + stage_row, p.stage_topk,
            n_keys - wpos0);
  load_rows(sm.p[wg], stage_copier, Int<128>{}, static_cast<const bf16*>(p.p_stage) + stage_row, p.stage_topk,
            n_keys - wpos0);
  const bf16* q_row = static_cast<const bf16*>(p.q) + q_idx * p.q_row_stride;
  const bf16* do_row = static_cast<const bf16*>(p.dout) + q_idx * p.dout_row_stride;
  auto load_chunk = [&](int chunk) {  // (the commit closes a group even when nothing is left)
    if (chunk < C::kChunks)
      load_rows(sm.q[chunk % 2], chunk_copier, Int<C::kThreads>{}, q_row + chunk * 64, p.q_head_stride, 64);
    if (chunk < C::kVChunks)
      load_rows(sm.dout[chunk % 2], chunk_copier, Int<C::kThreads>{}, do_row + chunk * 64, p.dout_head_stride, 64);
    cp_async_commit();
  };
  load_chunk(0);
  load_chunk(1);

  // deterministic: this thread's two accumulator rows (positions) -> their rows of the stage (every
  // position < topk; the caller sums them in order)
  float* dst[2];
  bool store[2];
  if constexpr (kDeterministic) {
    CUTLASS_PRAGMA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int pos = wpos0 + acc_row(h, tw);
      store[h] = pos < p.topk;
      dst[h] = p.det_stage + (row_in_chunk * p.topk + (store[h] ? pos : 0)) * kDqk + acc_col(0, tw);
    }
  }

  // kBulkSums: lanes 0..15 of warp w of a warpgroup add its positions 16 w.. (a bulk operation's
  // addresses are warp-uniform: ptxas issues one lane at a time, so four warps share the rows);
  // sum_dst: that position's row of dkv_acc (nullptr: invalid, nothing is added)
  const bool sum_lane = tw % 32 < 16;
  const int sum_row = 16 * (tw / 32) + tw % 32;
  float* sum_dst = nullptr;
  if constexpr (C::kBulkSums) {
    const int pos = wpos0 + sum_row;
    const int idx = sum_lane && pos < n_keys ? p.indices[q_idx * p.indices_row_stride + pos] : -1;
    if (idx >= 0 && idx < p.s_kv) sum_dst = p.dkv_acc + static_cast<int64_t>(idx) * kDqk;
  }

  typename C::Mma mma;
  Tensor acc = partition_fragment_C(mma, Shape<_64, _64>{});
  auto sDx = make_tensor(make_smem_ptr(sm.dx[wg]), typename C::Operand{});
  auto sP = make_tensor(make_smem_ptr(sm.p[wg]), typename C::Operand{});
  auto store_rows = [&](int chunk) {  // deterministic: chunk's 64 gradient columns into the stage
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc); i += 2) {  // value i: row half (i / 2) % 2, column 8 (i / 4) + ..
      const int h = (i / 2) % 2;
      if (store[h]) *reinterpret_cast<float2*>(dst[h] + chunk * 64 + 8 * (i / 4)) = make_float2(acc(i), acc(i + 1));
    }
  };
  // kBulkSums: chunk's accumulators -> its sums buffer (the bulk reductions' source), fenced for them
  auto stage_sums = [&](int chunk) {
    if constexpr (C::kBulkSums) {
      float* rows = &sm.sums.v[chunk % C::kSumBuffers][wg][0][0];
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(acc); i += 2)
        *reinterpret_cast<float2*>(rows + acc_row((i / 2) % 2, tw) * C::kSumRow + acc_col(i, tw)) =
            make_float2(acc(i), acc(i + 1));
      cutlass::arch::fence_view_async_shared();  // generic-proxy writes -> the bulk reductions' reads
    }
  };
  // kBulkSums, after a CTA barrier that follows stage_sums(chunk): the sum lanes add the staged
  // rows into dkv_acc
  auto add_sums = [&](int chunk) {
    if constexpr (C::kBulkSums) {
      if (sum_lane) {
        if (sum_dst != nullptr)
          bulk_reduce_add_f32(sum_dst + chunk * 64,
                              cast_smem_ptr_to_uint(&sm.sums.v[chunk % C::kSumBuffers][wg][sum_row][0]),
                              64 * sizeof(float));
        tma_store_arrive();  // (commits this lane's bulk group)
      }
    }
  };
  // chunk's products, then its 64 gradient columns
  auto run_chunk = [&](int chunk, auto with_dout) {
    cp_async_wait_group<1>();  // chunk's group (the one after it may still fly)
    cutlass::arch::fence_view_async_shared();  // cp.async's generic-proxy writes -> the wgmma reads
    __syncthreads();  // (kBulkSums: also the previous chunk's sums staged)
    if (chunk > 0) add_sums(chunk - 1);  // they run beside this chunk's products
    auto sQc = make_tensor(make_smem_ptr(sm.q[chunk % 2]), typename C::Operand{});
    wgmma_ss(mma, sDx, sQc, acc, true, tw);  // scale dX^T q[:, chunk]
    if constexpr (decltype(with_dout)::value) {
      auto sDoc = make_tensor(make_smem_ptr(sm.dout[chunk % 2]), typename C::Operand{});
      wgmma_ss(mma, sP, sDoc, acc, false, tw);  // + P^T dO[:, chunk]
    }
    warpgroup_commit_batch();
    warpgroup_wait<0>();
    // kBulkSums: the sums buffer this chunk stages into has been read (its reductions, kSumBuffers
    // chunks ago)
    if constexpr (C::kBulkSums) if (sum_lane) tma_store_wait<C::kSumBuffers - 1>();
    __syncthreads();  // every thread's products of this buffer are done
    load_chunk(chunk + 2);
    if constexpr (C::kBulkSums) stage_sums(chunk);
    else store_rows(chunk);
  };
#pragma unroll 1
  for (int chunk = 0; chunk < C::kVChunks; ++chunk) run_chunk(chunk, cute::true_type{});
  if constexpr (C::kChunks > C::kVChunks) run_chunk(C::kVChunks, cute::false_type{});  // the RoPE channels
  if constexpr (C::kBulkSums) {
    __syncthreads();
    add_sums(C::kChunks - 1);
    if (sum_lane) tma_store_wait<0>();  // the shared memory stays the CTA's until read
  }
  cp_async_wait_group<0>();  // (only empty groups are left)
#endif
}

}  // namespace sinkops::cuda::sm90
