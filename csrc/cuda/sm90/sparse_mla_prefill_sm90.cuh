// Sparse MLA prefill on Hopper (sm_90a): warpgroup MMA, a producer warpgroup gathering the top-k
// bf16 KV rows with cp.async into 128-byte-swizzled shared memory, mbarrier-synchronised
// (docs/DESIGN.md §2.2 for the math; bench/NOTES.md "Sparse MLA prefill, sm90" for the numbers).
// The CTA layout and the consumer warpgroups are sparse_mla_sm90_consumer.cuh's; this file has
// the bf16 producer and the epilogue (null sink folded once, lse / max_logits as DESIGN §2.2).
#pragma once
#include <cuda.h>  // CUtensorMap

#include "sinkops/sparse_mla_params.h"
#include "sparse_mla_sm90_consumer.cuh"

namespace sinkops::cuda::sm90 {

// Normalizes with the null sink, writes lse / max_logits, stores the bf16 rows of query q_idx.
template <int kDqk, int kWg>
struct PrefillEpilogue {
  using C = SparseMlaSm90Config<kDqk>;
  const SparseMlaPrefillParams& p;
  typename C::Smem& sm;
  int64_t q_idx;
  int head0;
  const SparseMlaMaps* maps;

  template <class Acc>
  __device__ __forceinline__ void operator()(const Acc& acc_o, const float row_max[2], const float total[2],
                                             const float true_max[2]) const {
    const int t = threadIdx.x % 128;
    sink::RowFinish f[2];
    finish_rows(row_max, total, true_max, p.attn_sink, head0, p.h_q, f);
    const float out_scale[2] = {f[0].out_scale, f[1].out_scale};
    CUTLASS_PRAGMA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int head = head0 + acc_row(h, t);
      if (kWg == 1 && t % 4 == 0 && head < p.h_q) {
        const int64_t sh = q_idx * p.h_q + head;
        p.lse[sh] = f[h].lse;
        p.max_logits[sh] = f[h].max_logit;
      }
    }
    if (maps->out_ok) return store_output_half_by_tma<C, kWg>(sm.q, acc_o, out_scale, *maps, head0, int(q_idx));
    bf16* out = static_cast<bf16*>(p.out) + q_idx * p.out_row_stride + int64_t(head0) * p.out_head_stride + kWg * 256;
    store_output_half<kWg>(sm.q + kWg * (64 * 256), acc_o, out_scale, out, p.out_head_stride, p.h_q - head0);
  }
};

// One CTA = one query row x 64 heads (CTAs that run rows one after another were 0-3 % slower:
// bench/NOTES.md "Prefill v1.4"). grid: (s_q, head blocks); block: 384 threads; dynamic smem: Smem
// of d_qk; maps: Q in and the output out by TMA where TMA can take them.
// kPair (an even number of head blocks; launched in clusters of (1, 2)): the two head-block CTAs of
// a query read the same rows, so each gathers only half of every block, rows 32 rank.. of each tile
// (4 KB, contiguous in the swizzled tile), by cp.async into its own buffer, and one thread sends
// them on to the same place in the peer's buffer, a bulk copy per tile (the TMA unit, shared::cta ->
// shared::cluster) that completes on the peer's `ready`: half the L2 -> SM traffic of a 128-head
// query. A region's `ready` then waits for this CTA's cp.asyncs and the peer's bytes; its `empty`
// for both CTAs' readers (the half this CTA gathers next also goes to the peer's buffer).
template <int kDqk, bool kPair>
__global__ void __launch_bounds__(384, 1)
    sparse_mla_prefill_sm90_kernel(const __grid_constant__ SparseMlaPrefillParams p,
                                   const __grid_constant__ SparseMlaMaps maps) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = SparseMlaSm90Config<kDqk>;
  constexpr int kTiles = C::kTiles, kLeft = C::kLeftTiles;
  // The producer threads that gather rows, and the spacing of a gathering thread's 4 rows.
  constexpr int kGatherThreads = kPair ? 64 : 128, kRowStep = kPair ? 8 : 16;
  constexpr uint32_t kHalfTileBytes = 32 * 64 * sizeof(bf16);  // 32 rows of a tile
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<typename C::Smem*>(smem_raw);

  const int64_t q_idx = blockIdx.x;
  const int head0 = blockIdx.y * C::kHeads;
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  const int rank = kPair ? int(cute::block_rank_in_cluster()) : 0;  // = blockIdx.y % 2

  int n_keys = p.topk;
  if (p.topk_length != nullptr) n_keys = min(max(p.topk_length[q_idx], 0), p.topk);
  const int n_steps = (n_keys + 2 * C::kBlockKeys - 1) / (2 * C::kBlockKeys);
  const bool q_by_tma = maps.q_ok;

  if (threadIdx.x == 0) {
    sm.q_ready.init(q_by_tma ? 1 : 128);  // the TMA-issuing thread, or every producer thread's cp.async
    for (int b = 0; b < 2; ++b) {
      for (int r = 0; r < 2; ++r) {
        // every gathering thread's cp.async arrival (kPair: + gathering thread 0's, expecting the peer's bytes)
        sm.ready[b][r].init(kPair ? kGatherThreads + 1 : kGatherThreads);
        // the one consumer that reads the region's values (128; kPair: + the peer's, one per warp)
        sm.empty[b][r].init(kPair ? 128 + 4 : 128);
        if constexpr (kPair) sm.gathered[b][r].init(kGatherThreads);  // this CTA's half landed
      }
      sm.valid_ready[b].init(kGatherThreads / 8);  // the producer threads that write the flags
    }
    if constexpr (kPair && C::kP0InRope) sm.p0_free.init(1);  // the peer's WG0 thread 0 (consume())
    cutlass::arch::fence_barrier_init();
  }
  if constexpr (kPair) {  // the peer's arrivals and bytes reach these barriers only once they exist
    cute::cluster_arrive_relaxed();
    cute::cluster_wait();
  } else {
    __syncthreads();
  }

  if (wg == 2) {
    // ======================= producer =======================
    cutlass::arch::warpgroup_reg_dealloc<C::kProducerRegs>();
    const int chunk = t % 8;      // 16-byte chunk of a 128-byte tile row
    const int row0 = t / 8;       // Q: rows row0 + 16 j, j < 4
    // Rows row0 + 16 j share row0's swizzle phase (it repeats every 8 rows) and tiles are 8-row
    // multiples apart, so one swizzled base address serves every row and tile of this thread.
    auto sQ = make_tensor(make_smem_ptr(sm.q), typename C::template Tiles<kTiles>{});
    bf16* const q_dst = &sQ(row0, chunk * 8);
    if (q_by_tma) {
      if (t == 0) {  // kTiles boxes of [64 heads, 64 channels]; the box bytes count heads past h_q
        arrive_expect_tx(sm.q_ready, uint32_t(C::kHeads * kDqk * sizeof(bf16)));
        const uint64_t policy = l2_evict_first_policy();
#pragma unroll
        for (int tile = 0; tile < kTiles; ++tile)
          tma_load_3d(cast_smem_ptr_to_uint(sm.q + tile * 4096), maps.q, sm.q_ready, tile * 64, head0, int(q_idx),
                      policy);
      }
    } else {
      const bf16* q_rows = static_cast<const bf16*>(p.q) + q_idx * p.q_row_stride;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int r = row0 + 16 * j;
        const bool ok = head0 + r < p.h_q;
        const bf16* src = q_rows + (ok ? (int64_t)(head0 + r) * p.q_head_stride : 0) + chunk * 8;
#pragma unroll
        for (int tile = 0; tile < kTiles; ++tile)
          cp_async_16_zfill_l2(q_dst + j * 1024 + tile * 4096, src + tile * 64, ok);
      }
      cp_async_arrive(sm.q_ready);
    }

    const int32_t* idx_row = p.indices + q_idx * p.indices_row_stride;
    if (t < kGatherThreads) {
      // This thread's rows of a block: kv_row0 + kRowStep j, j < 4 (kPair: this CTA's half, rows
      // 32 rank..; 8-row steps keep the swizzle phase too).
      const int kv_row0 = 32 * rank + row0;
      bf16* const kv_dst = &sQ(kv_row0, chunk * 8) - sm.q + sm.kv[0];  // the same position in KV buffer 0
      const bf16* kv = static_cast<const bf16*>(p.kv) + chunk * 8;
      const bf16* src[2][4];  // [buffer][j] this thread's chunk of the gathered row
      bool ok[2][4];
      auto row_ok = [&](int key) {  // anything else is a masked, zero-filled row
        const int idx = key < n_keys ? idx_row[key] : -1;
        return idx >= 0 && idx < p.s_kv;
      };
      auto copy_region = [&](int buf, int tile_begin, int tile_end) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int tile = tile_begin; tile < tile_end; ++tile)
            cp_async_16_zfill_l2(kv_dst + buf * (C::kBlockKeys * kDqk) + j * (kRowStep * 64) + tile * 4096,
                                 src[buf][j] + tile * 64, ok[buf][j]);
      };
      // The flags of all 64 keys of the block (kPair: this CTA's half from its gather, the peer's
      // half read here from the same indices, so both CTAs hold the same flags).
      auto publish_valid = [&](int buf, int step) {
        if (chunk == 0) {
#pragma unroll
          for (int j = 0; j < 4; ++j) sm.valid[buf][kv_row0 + kRowStep * j] = ok[buf][j];
          if constexpr (kPair) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              const int r = 32 * (rank ^ 1) + row0 + kRowStep * j;
              sm.valid[buf][r] = row_ok((2 * step + buf) * C::kBlockKeys + r);
            }
          }
          sm.valid_ready[buf].arrive();
        }
      };
      // A region's gather: its empty wait, (kPair: thread 0's expectation of the peer's half), the
      // copies, the arrivals once they land.
      auto fill = [&](int buf, int region, int tile_begin, int tile_end, int phase) {
        sm.empty[buf][region].wait(phase);
        if constexpr (kPair)
          if (t == 0) arrive_expect_tx(sm.ready[buf][region], uint32_t(tile_end - tile_begin) * kHalfTileBytes);
      };
      auto landed = [&](int buf, int region) {
        cp_async_arrive(sm.ready[buf][region]);
        if constexpr (kPair) cp_async_arrive(sm.gathered[buf][region]);
      };

      for (int step = 0; step < n_steps; ++step) {
        const int phase = (step & 1) ^ 1;  // the first wait on each empty barrier passes
#pragma unroll
        for (int buf = 0; buf < 2; ++buf)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int key = (2 * step + buf) * C::kBlockKeys + kv_row0 + kRowStep * j;
            const int idx = key < n_keys ? idx_row[key] : -1;
            ok[buf][j] = idx >= 0 && idx < p.s_kv;
            src[buf][j] = kv + (ok[buf][j] ? (int64_t)idx * p.kv_row_stride : 0);
          }
        // In the order the consumers read them: WG0 needs 0L then 0R, WG1 1R then 1L.
        fill(0, 0, 0, kLeft, phase);
        publish_valid(0, step);  // WG0 masked the previous block 0 before freeing 0L
        copy_region(0, 0, kLeft);
        landed(0, 0);
        fill(1, 1, kLeft, kTiles, phase);
        publish_valid(1, step);  // WG1 masked the previous block 1 before freeing 1R
        copy_region(1, kLeft, kTiles);
        landed(1, 1);
        fill(0, 1, kLeft, kTiles, phase);
        copy_region(0, kLeft, kTiles);
        landed(0, 1);
        fill(1, 0, 0, kLeft, phase);
        copy_region(1, 0, kLeft);
        landed(1, 0);
      }
      cp_async_wait_all();
    } else if (kPair && t == kGatherThreads) {
      // kPair: the sender. Once a region's half has landed here, the same rows go to the peer's
      // buffer. The gatherers waited for the region's `empty`, which counts the peer's readers: the
      // peer's copy of the region is free too.
      auto send = [&](int buf, int region, int tile_begin, int tile_end, int phase) {
        sm.gathered[buf][region].wait(phase);
        cutlass::arch::fence_view_async_shared();  // the cp.asyncs' generic-proxy writes -> the bulk copy's reads
        for (int tile = tile_begin; tile < tile_end; ++tile)
          bulk_copy_to_peer(sm.kv[buf] + tile * 4096 + 32 * rank * 64, kHalfTileBytes, sm.ready[buf][region]);
      };
      for (int step = 0; step < n_steps; ++step) {
        const int phase = step & 1;
        send(0, 0, 0, kLeft, phase);
        send(1, 1, kLeft, kTiles, phase);
        send(0, 1, kLeft, kTiles, phase);
        send(1, 0, 0, kLeft, phase);
      }
    }
    if constexpr (!kPair) return;
  } else if (wg == 0) {
    cutlass::arch::warpgroup_reg_alloc<C::kConsumerRegs>();
    consume<kDqk, 0, kPair>(p.sm_scale, sm, n_steps, PrefillEpilogue<kDqk, 0>{p, sm, q_idx, head0, &maps});
  } else {
    cutlass::arch::warpgroup_reg_alloc<C::kConsumerRegs>();
    consume<kDqk, 1, kPair>(p.sm_scale, sm, n_steps, PrefillEpilogue<kDqk, 1>{p, sm, q_idx, head0, &maps});
  }
  if constexpr (kPair) {  // no CTA leaves while its peer may still send to it or arrive on its barriers
    cute::cluster_arrive();
    cute::cluster_wait();
  }
#endif
}

}  // namespace sinkops::cuda::sm90
