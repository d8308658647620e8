// Sparse MLA decode over the paged FP8 KV caches on Hopper (sm_90a), DESIGN.md §2.3.
//
// One item = one (batch, s_q) row x 64 heads (the M of every wgmma; heads past h_q are zero rows
// never stored) x a split: a contiguous range of 64-key blocks of the row's key list (the main
// pool's top-k, then the extra pool's, one softmax). Persistent CTAs, one per SM (the shared
// memory allows no second): CTA c runs items c, c + grid, ... in (head block, split, row) order,
// and its producer converts the next item's first block and loads its Q while the consumers finish
// the item before and its epilogue (3 % faster than one CTA per item at 128 heads x batch 128, where
// items outnumber SMs 3.9x; equal elsewhere: bench/NOTES.md "Decode v7", "Decode v9"). 3 warpgroups,
// two 64-key buffers:
//   WG2, producer: per block, gathers the raw e4m3 bytes, scales and bf16 RoPE of 64 keys into
//        registers *before* the block's buffer is free, then (once it is) converts them into the
//        buffer, fences and arrives on ready[buf] (the gather: sparse_mla_decode_gather_sm90.cuh,
//        shared with the few-heads kernel). The next block's loads are issued right after the fence, so they
//        are in flight while the producer waits for the buffer (and none is outstanding at the
//        fence, whose MEMBAR would wait for it: bench/NOTES.md, decode v1).
//   WG0, softmax + left half: S = Q K^T of the block (64 x 64 fp32 in registers), mask, online
//        softmax, P to shared memory (stmatrix) with each row's rescale factor, O[:, 0:256] += P V
//        (RS wgmma, P from registers); then it issues the next block's QK at once, so the tensor
//        cores run it while WG1 does its half.
//   WG1, right half: rescales O[:, 256:512] by WG0's factors and adds P V (SS wgmma, P from shared).
// Both consumers free a buffer when their PV of it is done (empty[buf], 256 arrivals), so the
// producer always has one buffer to fill while the consumers read the other: the structure of
// FlashMLA's Hopper decode. (The prefill's "each consumer owns one block of a step" layout,
// sparse_mla_sm90_consumer.cuh, kept both buffers busy for a whole step here: the conversion
// could not run ahead; bench/NOTES.md, decode v2.1.)
//
// Epilogue: with one split the null sink is folded here (sink_policy.cuh) and lse written; with
// several the unnormalized partials go to the workspace (sparse_mla_decode_plan.cuh) and the
// combine kernel (sparse_mla_decode.cu) applies the sink once.
#pragma once
#include <algorithm>
#include <cstdlib>

#include "../kernel_launch.cuh"
#include "../sparse_mla_decode_plan.cuh"
#include "sparse_mla_decode_gather_sm90.cuh"

namespace sinkops::cuda::sm90 {

constexpr int kDecodeBlockKeys = 64;  // keys per block and per plan tile
// setmaxnreg split of the registers the launch gives the CTA (384 threads x 168, __launch_bounds__
// (384, 1)): WG0 holds S, P and half of O; WG1 half of O; the producer two key rows of raw bytes
// (76-88 registers). The three must sum to at most 3 x 168 = 504, or WG0's setmaxnreg.inc waits
// forever for registers nobody frees.
#ifndef SINKOPS_DECODE_REGS
#define SINKOPS_DECODE_REGS 216, 160, 128
#endif
constexpr int kDecodeRegs[3] = {SINKOPS_DECODE_REGS};
constexpr int kDecodeWg0Regs = kDecodeRegs[0], kDecodeWg1Regs = kDecodeRegs[1], kDecodeProducerRegs = kDecodeRegs[2];
static_assert(kDecodeWg0Regs + kDecodeWg1Regs + kDecodeProducerRegs <= 3 * 168, "registers");

template <int kDqk>
struct DecodeSm90Config {
  using Base = SparseMlaSm90Config<kDqk>;  // tile layouts and MMA atoms (the prefill's)
  static constexpr int kTiles = kDqk / 64;
  struct Smem {
    alignas(1024) bf16 q[64 * kDqk];      // [64 heads, d_qk]  Base::Tiles<kTiles>
    alignas(1024) bf16 kv[2][64 * kDqk];  // [2][64 keys, d_qk] Base::Tiles<kTiles>
    alignas(1024) bf16 p[64 * 64];        // [64 heads, 64 keys] Base::Tiles<1>: P of the block
    float row_scale[64];                  // per head row: WG0's rescale of O for this block
    float out_scale[2][64];               // per item parity, head row: the epilogue's 1 / (sum + sink)
    int32_t valid[2][64];                 // per buffer: key gathered (1) or masked (0)
    Barrier q_ready, ready[2], empty[2];
    Barrier q_empty;  // WG0's QKs of the item are done (the next item may load its Q)
    Barrier sent[2];  // 2-CTA pairs: the peer has this CTA's half of the buffer's block (its WG0, once a fill)
  };
  static constexpr int kSmemBytes = sizeof(Smem);
};

// Named barriers (0 is __syncthreads; 5 and 6 are the output stores' kOut0Staged + wg, one
// warpgroup each); each of these joins WG0 and WG1.
// kDecodeHalfStored joins the producer's 128 threads (2-CTA pairs: the half block is stored, send it).
enum DecodeBarrier : int { kDecodePReady = 1, kDecodePFree = 2, kDecodeScalesReady = 3, kDecodeHalfStored = 4 };
static_assert(int(kDecodeHalfStored) < int(kOut0Staged), "barrier ids");

// The producer warpgroup: the block gather (sparse_mla_decode_gather_sm90.cuh) into the two buffers,
// a block ahead of the consumers. kPair (2-CTA clusters, the two head blocks of a row): it gathers
// and converts one row per thread, rows 32 rank.. of the block, and sends them on to the same place
// in the peer's buffer (one 4 KB bulk copy per tile: rows 32 rank.. of a swizzled tile are
// contiguous), completing on the peer's `ready`; the peer sends the other half here.
template <KvCacheLayout L, bool kPair = false>
struct DecodeProducer {
  static constexpr int kDqk = KvLayout<L>::kDqk;
  using C = DecodeSm90Config<kDqk>;
  static constexpr int kTiles = C::kTiles;
  static constexpr int kRows = kPair ? 1 : 2;
  static constexpr uint32_t kHalfTileBytes = 32 * 64 * sizeof(bf16);
  using Gather = Fp8BlockGather<L, kRows>;
  using Staged = typename Gather::Staged;

  Gather g;
  typename C::Smem& sm;

  // Q rows of this head block (zero rows past h_q) into the q buffer: by TMA (maps.q_ok: one
  // thread, evict_first, kTiles boxes of 64 heads x 64 channels; the box bytes count heads past
  // h_q) or by every thread's cp.async, 16-byte chunks 2 quarter and 2 quarter + 1.
  __device__ void load_q(int head0, const SparseMlaMaps& maps) {
    const SparseMlaDecodeParams& p = g.p;
    if (maps.q_ok) {
      if (threadIdx.x % 128 == 0) {
        arrive_expect_tx(sm.q_ready, uint32_t(64 * kDqk * sizeof(bf16)));
        const uint64_t policy = l2_evict_first_policy();
#pragma unroll
        for (int tile = 0; tile < kTiles; ++tile)
          tma_load_4d(cast_smem_ptr_to_uint(sm.q + tile * 4096), maps.q, sm.q_ready, tile * 64, head0, g.si, g.bi,
                      policy);
      }
      return;
    }
    const bf16* q_rows = static_cast<const bf16*>(p.q) + g.bi * p.q_batch_stride + g.si * p.q_row_stride;
    const int64_t q_off = sm.q - sm.kv[0];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int r = g.row0 + 32 * j;
      const bool ok = head0 + r < p.h_q;
      const bf16* src = q_rows + (ok ? int64_t(head0 + r) * p.q_head_stride : 0) + g.quarter * 16;
#pragma unroll
      for (int tile = 0; tile < kTiles; ++tile) {
        cp_async_16_zfill_l2(g.chunk0 + q_off + j * 2048 + tile * 4096, src + tile * 64, ok);
        cp_async_16_zfill_l2(g.chunk1 + q_off + j * 2048 + tile * 4096, src + tile * 64 + 8, ok);
      }
    }
    cp_async_arrive(sm.q_ready);
    cp_async_commit();
  }

  // Per block: wait for the buffer, convert what is staged, fence (generic-proxy stores -> the
  // consumers' wgmma reads), arrive; then issue the next block's loads and the indices of the one
  // after (the indices are two blocks ahead, so a block's loads never wait for its index loads).
  // blk_base: the blocks of this CTA's earlier items (the buffers' phases run on across items);
  // after_block(blk) runs once block blk is handed over and the next block's loads are issued.
  template <class AfterBlock>
  __device__ void run_blocks(int n_blocks, int blk_base, AfterBlock&& after_block) {
    if (n_blocks > 0) {
      const int t = threadIdx.x % 128;
      int idx[2];
      Staged s[kRows];
      bool other_ok = false;  // kPair: the peer's row of the staged block is a valid key
      g.load_indices(idx, 0);
      g.load(s, 0, idx);
      if constexpr (kPair) other_ok = g.other_row_ok(0, idx);
      if (n_blocks > 1) g.load_indices(idx, 1);
      for (int blk = 0; blk < n_blocks; ++blk) {
        const int gb = blk_base + blk, buf = gb & 1;
        sm.empty[buf].wait(((gb >> 1) & 1) ^ 1);  // the first wait on each buffer passes
        if constexpr (kPair)  // the peer's half (its bytes may land before this)
          if (t == 0) arrive_expect_tx(sm.ready[buf], kTiles * kHalfTileBytes);
        g.store(s, buf * (64 * kDqk), sm.valid[buf]);
        if constexpr (kPair)
          if (g.quarter == 0) sm.valid[buf][g.row0 + 32 * (g.half ^ 1)] = other_ok;
        cutlass::arch::fence_view_async_shared();
        sm.ready[buf].arrive();
        if constexpr (kPair) {  // every thread's half is stored and fenced: one thread sends it
          bar_sync(kDecodeHalfStored, 128);
          if (t == 0)
            for (int tile = 0; tile < kTiles; ++tile)
              bulk_copy_to_peer(sm.kv[buf] + tile * 4096 + g.half * 2048, kHalfTileBytes, sm.ready[buf]);
        }
        if (blk + 1 < n_blocks) {
          g.load(s, blk + 1, idx);
          if constexpr (kPair) other_ok = g.other_row_ok(blk + 1, idx);
          if (blk + 2 < n_blocks) g.load_indices(idx, blk + 2);
        }
        after_block(blk);
      }
    }
  }
};

// The output of one consumer's half: normalized bf16 rows (one split) or the unnormalized fp32
// partial rows in the workspace (several; WG0 writes the rows' (max, sum)). One split: the rows
// are staged in `stage`, the KV buffer of the item's last block (the q buffer may already be
// taking the next item's Q), and stored by TMA or the threads; with no block (stage == nullptr:
// an empty key list, topk 0 in both pools, which the C++ API allows and the Python op refuses)
// each thread stores its own pairs.
template <int kDqk, int kWg, class Acc>
__device__ __forceinline__ void decode_store_half(const SparseMlaDecodeParams& p, const SparseMlaMaps& maps,
                                                  const Acc& acc_o, const float out_scale[2], int row, int head0,
                                                  int split, bf16* stage) {
  using sparse_mla_decode::kPartialDv;
  const int t = threadIdx.x % 128;
  if (p.num_splits == 1) {
    bf16* out = static_cast<bf16*>(p.out) + (int64_t(row) * p.h_q + head0) * kPartialDv + kWg * 256;
    if (stage == nullptr) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(acc_o); i += 2) {
        const int h = (i / 2) % 2, r = acc_row(h, t), col = acc_col(i, t);
        if (head0 + r < p.h_q)
          *reinterpret_cast<__nv_bfloat162*>(out + r * kPartialDv + col) =
              __floats2bfloat162_rn(acc_o(i) * out_scale[h], acc_o(i + 1) * out_scale[h]);
      }
    } else if (maps.out_ok) {
      store_output_half_by_tma<typename DecodeSm90Config<kDqk>::Base, kWg>(stage, acc_o, out_scale, maps, head0, row);
    } else {
      store_output_half<kWg>(stage + kWg * (64 * 256), acc_o, out_scale, out, kPartialDv, p.h_q - head0);
    }
    return;
  }
  const int64_t part0 = (int64_t(row) * p.num_splits + split) * p.h_q + head0;  // partial row of head0
  float* ws_o = static_cast<float*>(p.workspace) + part0 * kPartialDv + kWg * 256;
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < size(acc_o); i += 2) {
    const int r = acc_row((i / 2) % 2, t), col = acc_col(i, t);
    if (head0 + r < p.h_q) *reinterpret_cast<float2*>(ws_o + r * kPartialDv + col) = make_float2(acc_o(i), acc_o(i + 1));
  }
}

// kPair (2-CTA clusters): before a one-split item's epilogue stages its output in the KV buffer of
// its last block, that buffer's half must have reached the peer (it is the source of a bulk copy,
// which signals only the peer): the peer's WG0 arrives on `sent` after each of its `ready` waits.
// No parity aliasing: the peer's next arrival on that buffer needs this CTA's next half there, which
// waits for `empty`, which this item's consumers arrive on only after the epilogue.
template <bool kPair>
__device__ __forceinline__ void wait_half_sent(const SparseMlaDecodeParams& p, Barrier (&sent)[2], int blk_base,
                                               int n_blocks) {
  if constexpr (kPair) {
    const int gb = blk_base + n_blocks - 1;
    if (p.num_splits == 1 && n_blocks > 0) sent[gb & 1].wait((gb >> 1) & 1);
  }
}

// kPair, one split, output stored by the threads (no output map): the stage's generic-proxy stores
// before the buffer is released to the peer's next bulk copy (async proxy) into it.
template <bool kPair>
__device__ __forceinline__ void fence_stage_for_peer(const SparseMlaDecodeParams& p, const SparseMlaMaps& maps,
                                                     int n_blocks) {
  if constexpr (kPair)
    if (p.num_splits == 1 && n_blocks > 0 && !maps.out_ok) cutlass::arch::fence_view_async_shared();
}

// WG0: S, softmax, P, the left half of O; the row statistics and lse at the end.
// blk_base: the blocks of this CTA's earlier items (the buffers' phases run on); q_phase: this
// item's phase of q_ready. The caller has set the warpgroup's registers (kDecodeWg0Regs).
template <int kDqk, bool kPair = false>
__device__ __forceinline__ void decode_softmax_wg(const SparseMlaDecodeParams& p, typename DecodeSm90Config<kDqk>::Smem& sm,
                                                  const SparseMlaMaps& maps,
                                                  int n_blocks, int row, int head0, int split, int blk_base,
                                                  int q_phase) {
  using Base = SparseMlaSm90Config<kDqk>;
  using MmaQK = typename Base::MmaQK;
  using MmaPVReg = typename Base::MmaPVReg;
  constexpr int kTiles = Base::kTiles;
  const int t = threadIdx.x % 128;
  const float scale_log2 = p.sm_scale * sink::kLog2e;

  Tensor acc_s = partition_fragment_C(MmaQK{}, Shape<_64, _64>{});                      // S, then P (fp32)
  Tensor p_reg = make_tensor<bf16>(partition_shape_A(MmaPVReg{}, Shape<_64, _64>{}));  // P (bf16)
  Tensor acc_o = partition_fragment_C(MmaPVReg{}, Shape<_64, _256>{});                 // O[:, 0:256]
  clear(acc_o);
  float row_max[2] = {-INFINITY, -INFINITY};  // rows acc_row(0 / 1), log2 units
  float row_sum[2] = {0.f, 0.f};              // this thread's columns of P only
  // The shared update also tracks the true max for the prefill's max_logits; the decode has no such
  // output, so finish_rows' max_logit is never read and ptxas drops the fmax chain.
  float seen_max[2] = {-INFINITY, -INFINITY};
  auto sP = make_tensor(make_smem_ptr(sm.p), typename Base::template Tiles<1>{});

  auto issue_qk = [&](int buf) {
    CUTLASS_PRAGMA_UNROLL
    for (int tile = 0; tile < kTiles; ++tile) {
      auto sQt = make_tensor(make_smem_ptr(sm.q + tile * 4096), typename Base::template Tiles<1>{});
      auto sKt = make_tensor(make_smem_ptr(sm.kv[buf] + tile * 4096), typename Base::template Tiles<1>{});
      wgmma_ss(MmaQK{}, sQt, sKt, acc_s, tile == 0, t);
    }
    warpgroup_commit_batch();
  };

  auto seen = [&](int buf) {  // kPair: tell the peer its half of this fill is here
    if constexpr (kPair)
      if (t == 0) arrive_on_peer(sm.sent[buf]);
  };
  sm.q_ready.wait(q_phase);
  if (n_blocks > 0) {
    sm.ready[blk_base & 1].wait((blk_base >> 1) & 1);
    seen(blk_base & 1);
    issue_qk(blk_base & 1);
    warpgroup_wait<0>();
  }
  // Every wgmma is retired by the end of an iteration: with one still in flight across the loop's
  // back edge, ptxas 13.0 serializes every wgmma of the kernel (C7514 / C7515).
  for (int blk = 0; blk < n_blocks; ++blk) {
    const int gb = blk_base + blk, buf = gb & 1;
    // Masked keys -> -inf (raw logits: the scale folds into the exponent); then P = 2^(x - m_new),
    // O and l rescaled (lazily: online_softmax_update).
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc_s); ++i) acc_s(i) = sm.valid[buf][acc_col(i, t)] ? acc_s(i) : -INFINITY;
    float rescale[2], m_new[2];
    online_softmax_update(acc_s, p_reg, acc_o, scale_log2, row_max, row_max, row_sum, seen_max, m_new, rescale);
    if (blk > 0) bar_sync(kDecodePFree, 256);  // WG1's PV of the previous block has read P and row_scale
    store_tile_stmatrix<MmaQK>(p_reg, sP, t);
    if (t % 4 == 0) {
      sm.row_scale[acc_row(0, t)] = rescale[0];
      sm.row_scale[acc_row(1, t)] = rescale[1];
    }
    cutlass::arch::fence_view_async_shared();  // generic-proxy stores -> WG1's wgmma reads
    bar_arrive(kDecodePReady, 256);
    auto sV = make_tensor(make_smem_ptr(sm.kv[buf]), typename Base::template ValueView<4>{});
    wgmma_rs(MmaPVReg{}, p_reg, sV, acc_o, t);  // O[:, 0:256] += P V[0:256]
    warpgroup_commit_batch();
    if (blk + 1 < n_blocks) {
      sm.ready[buf ^ 1].wait(((gb + 1) >> 1) & 1);
      seen(buf ^ 1);
      issue_qk(buf ^ 1);  // S of the next block while this PV (and WG1's half) runs
      warpgroup_wait<1>();
      release_buffer<kPair>(sm.empty[buf]);
      warpgroup_wait<0>();
    } else {
      warpgroup_wait<0>();
      if (p.num_splits > 1) release_buffer<kPair>(sm.empty[buf]);  // (one split: after the epilogue, staged in it)
    }
  }
  sm.q_empty.arrive();  // every QK is done: the next item's Q may land during this epilogue

  // ---- row statistics, the sink, lse (or the partials' (max, sum)) ----
  float total[2];
  CUTLASS_PRAGMA_UNROLL
  for (int h = 0; h < 2; ++h) {
    total[h] = row_sum[h] + __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    total[h] += __shfl_xor_sync(0xffffffffu, total[h], 2);
  }
  const int bi = row / p.s_q, si = row % p.s_q;
  float out_scale[2] = {1.f, 1.f};
  if (p.num_splits == 1) {
    sink::RowFinish f[2];
    finish_rows(row_max, total, seen_max, p.attn_sink, head0, p.h_q, f);
    CUTLASS_PRAGMA_UNROLL
    for (int h = 0; h < 2; ++h) {
      out_scale[h] = f[h].out_scale;
      const int r = acc_row(h, t), head = head0 + r;
      if (t % 4 == 0) {
        sm.out_scale[q_phase][r] = f[h].out_scale;
        if (head < p.h_q) p.lse[(int64_t(bi) * p.h_q + head) * p.s_q + si] = f[h].lse;
      }
    }
  } else if (t % 4 == 0) {
    float2* ws_ml = reinterpret_cast<float2*>(static_cast<float*>(p.workspace) +
                                              sparse_mla_decode::partial_o_elems(p, p.num_splits));
    const int64_t part0 = (int64_t(row) * p.num_splits + split) * p.h_q + head0;
    CUTLASS_PRAGMA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int r = acc_row(h, t);
      if (head0 + r < p.h_q) ws_ml[part0 + r] = make_float2(total[h] == 0.f ? -INFINITY : row_max[h], total[h]);
    }
  }
  bar_sync(kDecodeScalesReady, 256);  // out_scale for WG1; WG1's PVs of the last block are done
  const int last = (blk_base + n_blocks - 1) & 1;
  wait_half_sent<kPair>(p, sm.sent, blk_base, n_blocks);
  decode_store_half<kDqk, 0>(p, maps, acc_o, out_scale, row, head0, split, n_blocks > 0 ? sm.kv[last] : nullptr);
  fence_stage_for_peer<kPair>(p, maps, n_blocks);
  if (p.num_splits == 1 && n_blocks > 0)
    release_buffer<kPair>(sm.empty[last]);  // (thread 0: after its TMA store read the stage)
}

// WG1: the right half of O. q_phase: this item's parity (its out_scale slot).
// The caller has set the warpgroup's registers (kDecodeWg1Regs).
template <int kDqk, bool kPair = false>
__device__ __forceinline__ void decode_right_half_wg(const SparseMlaDecodeParams& p, typename DecodeSm90Config<kDqk>::Smem& sm,
                                                     const SparseMlaMaps& maps,
                                                     int n_blocks, int row, int head0, int split, int blk_base,
                                                     int q_phase) {
  using Base = SparseMlaSm90Config<kDqk>;
  using MmaPVSmem = typename Base::MmaPVSmem;
  const int t = threadIdx.x % 128;
  Tensor acc_o = partition_fragment_C(MmaPVSmem{}, Shape<_64, _256>{});  // O[:, 256:512]
  clear(acc_o);
  auto sP = make_tensor(make_smem_ptr(sm.p), typename Base::template Tiles<1>{});
  for (int blk = 0; blk < n_blocks; ++blk) {
    const int buf = (blk_base + blk) & 1;
    bar_sync(kDecodePReady, 256);
    const float scale[2] = {sm.row_scale[acc_row(0, t)], sm.row_scale[acc_row(1, t)]};
    if (__any_sync(0xffffffffu, scale[0] != 1.f || scale[1] != 1.f)) {  // lazy rescaling: rarely
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(acc_o); ++i) acc_o(i) *= scale[(i / 2) % 2];
    }
    auto sV = make_tensor(make_smem_ptr(sm.kv[buf] + 64 * 256), typename Base::template ValueView<4>{});
    wgmma_ss(MmaPVSmem{}, sP, sV, acc_o, false, t);  // O[:, 256:512] += P V[256:512]
    warpgroup_commit_batch();
    warpgroup_wait<0>();
    if (blk + 1 < n_blocks) bar_arrive(kDecodePFree, 256);
    if (blk + 1 < n_blocks || p.num_splits > 1)
      release_buffer<kPair>(sm.empty[buf]);  // (one split: the last after the epilogue)
  }
  bar_sync(kDecodeScalesReady, 256);
  float out_scale[2] = {1.f, 1.f};
  if (p.num_splits == 1) {
    out_scale[0] = sm.out_scale[q_phase][acc_row(0, t)];
    out_scale[1] = sm.out_scale[q_phase][acc_row(1, t)];
  }
  const int last = (blk_base + n_blocks - 1) & 1;
  wait_half_sent<kPair>(p, sm.sent, blk_base, n_blocks);
  decode_store_half<kDqk, 1>(p, maps, acc_o, out_scale, row, head0, split, n_blocks > 0 ? sm.kv[last] : nullptr);
  fence_stage_for_peer<kPair>(p, maps, n_blocks);
  if (p.num_splits == 1 && n_blocks > 0) release_buffer<kPair>(sm.empty[last]);
}

// One item: a head block of one row's split, and its key range.
struct DecodeItem {
  int head0, split, row, key_begin, key_end, n_blocks;
};

// Items of a launch, ordered head block fastest, then split, then row (= b x s_q); the kernel's
// item loop and the launch's grid size both read this one count.
__host__ __device__ __forceinline__ int decode_head_blocks(const SparseMlaDecodeParams& p) { return (p.h_q + 63) / 64; }
__host__ __device__ __forceinline__ int64_t decode_item_count(const SparseMlaDecodeParams& p) {
  return int64_t(decode_head_blocks(p)) * p.num_splits * p.b * p.s_q;
}

__device__ __forceinline__ DecodeItem decode_item(const SparseMlaDecodeParams& p, int64_t item) {
  const int head_blocks = decode_head_blocks(p);
  DecodeItem it;
  it.head0 = int(item % head_blocks) * 64;
  it.split = int(item / head_blocks % p.num_splits);
  it.row = int(item / (int64_t(head_blocks) * p.num_splits));
  const int total = p.pool.topk + p.extra.topk;
  it.key_begin = it.split * p.tiles_per_split * kDecodeBlockKeys;
  it.key_end = min(it.key_begin + p.tiles_per_split * kDecodeBlockKeys, total);
  it.n_blocks = it.key_end > it.key_begin ? (it.key_end - it.key_begin + kDecodeBlockKeys - 1) / kDecodeBlockKeys : 0;
  return it;
}

// grid: min(items, SMs); block: 384 threads; dynamic smem: Smem of d_qk. The barriers' phases run
// on across items: a buffer's k-th fill is the CTA's k-th block overall (blk_base counts the
// blocks of earlier items), Q's k-th load is item k's. Item k's Q load follows item k - 1's
// q_empty, which WG0 arrives on once its last QK is done, so it lands while item k - 1's epilogue
// runs; the epilogue stages the output in the KV buffer of the item's last block, whose `empty`
// arrivals wait until the stage is stored (v8: bench/NOTES.md "Decode v8"). Across items, WG0
// writes P and row_scale only after the ScalesReady barrier of the item before (so after WG1's
// last reads of them there), and out_scale alternates by item parity (WG1 reads item k's after
// ScalesReady k; WG0 writes item k + 2's after ScalesReady k + 1).
// kPair (an even number of head blocks, an even grid, clusters of (2, 1, 1)): CTAs 2c and 2c + 1 run
// items 2c + m grid and 2c + 1 + m grid, the two head blocks of one (row, split) with the same keys,
// so each gathers and converts half of every block for both (DecodeProducer). A buffer's `ready`
// then also waits for the peer's half; its `empty` for both CTAs' consumers (the peer sends into it).
template <KvCacheLayout L, bool kPair = false>
__global__ void __launch_bounds__(384, 1)
    sparse_mla_decode_sm90_kernel(const __grid_constant__ SparseMlaDecodeParams p,
                                  const __grid_constant__ SparseMlaMaps maps) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kDqk = KvLayout<L>::kDqk;
  using C = DecodeSm90Config<kDqk>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<typename C::Smem*>(smem_raw);
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  allow_dependents();  // the combine (a programmatic dependent) may be scheduled now; it waits for us
  const int64_t n_items = decode_item_count(p);

  if (threadIdx.x == 0) {
    sm.q_ready.init(maps.q_ok ? 1 : 128);  // the TMA-issuing thread, or every producer thread's cp.async
    sm.q_empty.init(128);  // every WG0 thread, after its last QK of the item
    for (int b = 0; b < 2; ++b) {
      // every producer thread, once its share is converted (kPair: + thread 0's expectation of the peer's half)
      sm.ready[b].init(kPair ? 128 + 1 : 128);
      // every consumer thread, once its PV of the buffer (or its stage) is done (kPair: + the peer's warps)
      sm.empty[b].init(kPair ? 256 + 8 : 256);
      if constexpr (kPair) sm.sent[b].init(1);  // the peer's WG0 thread 0, once a fill
    }
    cutlass::arch::fence_barrier_init();
  }
  if constexpr (kPair) {  // the peer's arrivals and bytes reach these barriers only once they exist
    cute::cluster_arrive_relaxed();
    cute::cluster_wait();
  } else {
    __syncthreads();
  }

  int blk_base = 0;
  if (wg == 2) {
    cutlass::arch::warpgroup_reg_dealloc<kDecodeProducerRegs>();
    int k = 0;
    for (int64_t item = blockIdx.x; item < n_items; item += gridDim.x, ++k) {
      const DecodeItem it = decode_item(p, item);
      using Producer = DecodeProducer<L, kPair>;
      Producer producer{typename Producer::Gather(p, it.row, it.key_begin, it.key_end, sm.kv[0], t), sm};
      if constexpr (kPair) producer.g.half = int(cute::block_rank_in_cluster());
      // The first item's Q goes first, as in the one-item kernel; a later item's after this item's
      // first block (converted while the item before runs its last block), once the item
      // before's QKs are done: the Q lands during that item's epilogue.
      auto load_q = [&] {
        if (k > 0) sm.q_empty.wait((k - 1) & 1);
        producer.load_q(it.head0, maps);
      };
      if (k == 0 || it.n_blocks == 0) load_q();
      producer.run_blocks(it.n_blocks, blk_base, [&](int blk) {
        if (k > 0 && blk == 0) load_q();
      });
      blk_base += it.n_blocks;
    }
    cp_async_wait_all();
  } else if (wg == 0) {
    cutlass::arch::warpgroup_reg_alloc<kDecodeWg0Regs>();
    int k = 0;
    for (int64_t item = blockIdx.x; item < n_items; item += gridDim.x, ++k) {
      const DecodeItem it = decode_item(p, item);
      decode_softmax_wg<kDqk, kPair>(p, sm, maps, it.n_blocks, it.row, it.head0, it.split, blk_base, k & 1);
      blk_base += it.n_blocks;
    }
  } else {
    cutlass::arch::warpgroup_reg_dealloc<kDecodeWg1Regs>();
    int k = 0;
    for (int64_t item = blockIdx.x; item < n_items; item += gridDim.x, ++k) {
      const DecodeItem it = decode_item(p, item);
      decode_right_half_wg<kDqk, kPair>(p, sm, maps, it.n_blocks, it.row, it.head0, it.split, blk_base, k & 1);
      blk_base += it.n_blocks;
    }
  }
  if constexpr (kPair) {  // no CTA leaves while its peer may still send to it or arrive on its barriers
    cute::cluster_arrive();
    cute::cluster_wait();
  }
#endif
}

// Per-layout launch, instantiated in sparse_mla_decode_sm90_v4.cu / _v32.cu (they compile in parallel).
// SINKOPS_DECODE_PAIR=1 runs the two head blocks of a row in 2-CTA clusters where they pair up (an
// even number of head blocks: 128 heads). Opt-in until its device run (written 2026-12-08 when no
// GPU was lent: bench/NOTES.md "Prefill v1.7"); the default kernel's SASS is the measured one's.
inline bool decode_pairs_enabled() {
  const char* env = std::getenv("SINKOPS_DECODE_PAIR");
  return env != nullptr && *env == '1';
}

template <KvCacheLayout L>
void launch_decode_sm90(const SparseMlaDecodeParams& p, cudaStream_t stream) {
  constexpr int smem = DecodeSm90Config<KvLayout<L>::kDqk>::kSmemBytes;
  const bool pairs = decode_head_blocks(p) % 2 == 0 && decode_pairs_enabled();
  int ctas = int(std::min<int64_t>(decode_item_count(p), device_info(current_device()).sm_count));
  SparseMlaMaps maps{};  // q [b, s_q, h_q, d_qk], out [b x s_q, h_q, 512]: boxes of 64 channels x 64 heads (x 1 x 1)
  if (tma_enabled()) {  // else (SINKOPS_WA90_TMA=0, tests) cp.async loads Q and the threads store
    const MapDim q_outer[3] = {{p.h_q, p.q_head_stride, 64}, {p.s_q, p.q_row_stride, 1}, {p.b, p.q_batch_stride, 1}};
    maps.q_ok = encode_tile_map(maps.q, true, p.q, KvLayout<L>::kDqk, q_outer, 64);
    maps.out_ok = p.num_splits == 1 && encode_tile_map(maps.out, true, p.out, 512, MapDim{p.h_q, 512, 64},
                                                       MapDim{int64_t(p.b) * p.s_q, int64_t(p.h_q) * 512, 1}, 64);
  }
  if (pairs) {  // an even grid: CTA c's items are c + m grid, so a cluster's two always share a row
    constexpr auto kernel = sparse_mla_decode_sm90_kernel<L, true>;
    reserve_dynamic_smem<kernel>(smem, "sparse_mla_decode (sm90, pairs)");
    ctas &= ~1;
    launch_clustered(kernel, dim3(ctas), dim3(384), smem, dim3(2, 1, 1), stream, "sparse_mla_decode (sm90, pairs)", p,
                     maps);
    return;
  }
  constexpr auto kernel = sparse_mla_decode_sm90_kernel<L>;
  reserve_dynamic_smem<kernel>(smem, "sparse_mla_decode (sm90)");
  kernel<<<ctas, 384, smem, stream>>>(p, maps);
  check_launch("sparse_mla_decode (sm90)");
}
extern template void launch_decode_sm90<KvCacheLayout::kV4>(const SparseMlaDecodeParams&, cudaStream_t);
extern template void launch_decode_sm90<KvCacheLayout::kV32>(const SparseMlaDecodeParams&, cudaStream_t);

}  // namespace sinkops::cuda::sm90
