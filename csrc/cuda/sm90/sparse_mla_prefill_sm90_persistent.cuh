// The persistent form of the sm_90a sparse MLA prefill (sparse_mla_prefill_sm90.cuh): one CTA per
// SM (its shared memory allows no second) runs the (query row, 64-head block) items blockIdx.x,
// blockIdx.x + gridDim.x, ... of the s_q x head-block list (a row's head blocks s_q apart, so the
// CTAs of a wave work on neighbouring queries, as the one-item grid's do). Why: a one-item CTA's
// prologue (Q, the indices, the first gather) and epilogue (the output stores) run with nothing
// else on its SM; here the producer gathers the next item's first step while the consumers still
// run the last step and the epilogue of the item before, and loads the next Q as soon as the
// epilogue has stored the output staged in the q buffer (q_empty).
// Status: a tuning variant (SINKOPS_PREFILL_PERSISTENT=1, sparse_mla_sm90_consumer.cuh), compiled,
// not yet run on a GPU. If it wins it replaces the one-item kernel (with s_q x head blocks <= SMs
// it does that kernel's work in its order), else it goes (bench/NOTES.md "Prefill v1.4"). Until
// then its producer's step is a copy of the one-item kernel's (changing that kernel to share it
// changed its SASS, which must stay the tested one: docs/DECISIONS.md).
#pragma once
#include "sparse_mla_prefill_sm90.cuh"

namespace sinkops::cuda::sm90 {

// One item: the query row, its head block and its step count.
struct PrefillItem {
  int64_t q_idx;
  int head0, n_keys, n_steps;
};

// This CTA's walk over the item list.
struct PrefillItems {
  int64_t item, end;
  __device__ explicit PrefillItems(const SparseMlaPrefillParams& p)
      : item(blockIdx.x), end(p.s_q * ((p.h_q + 63) / 64)) {}
  __device__ bool next() {  // false when this CTA has no item left
    item += gridDim.x;
    return item < end;
  }
  __device__ PrefillItem get(const SparseMlaPrefillParams& p, int block_keys) const {
    PrefillItem it;
    it.q_idx = item % p.s_q;
    it.head0 = int(item / p.s_q) * 64;
    it.n_keys = p.topk;
    if (p.topk_length != nullptr) it.n_keys = min(max(p.topk_length[it.q_idx], 0), p.topk);
    it.n_steps = (it.n_keys + 2 * block_keys - 1) / (2 * block_keys);
    return it;
  }
};

// grid: min(s_q x head blocks, SMs); block: 384 threads; dynamic smem: Smem of d_qk.
// The barriers' phases run on across items: a region's k-th fill is the CTA's k-th step overall
// (step_base counts the steps of earlier items), Q's k-th load is item k's.
template <int kDqk>
__global__ void __launch_bounds__(384, 1)
    sparse_mla_prefill_sm90_persistent_kernel(const __grid_constant__ SparseMlaPrefillParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = SparseMlaSm90Config<kDqk>;
  constexpr int kTiles = C::kTiles, kLeft = C::kLeftTiles;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<typename C::Smem*>(smem_raw);

  PrefillItems items(p);
  PrefillItem it = items.get(p, C::kBlockKeys);
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;

  if (threadIdx.x == 0) {
    sm.q_ready.init(128);
    sm.q_empty.init(256);  // every consumer thread, after its stores read the stage
    for (int b = 0; b < 2; ++b) {
      for (int r = 0; r < 2; ++r) {
        sm.ready[b][r].init(128);  // every producer thread's cp.async arrival
        sm.empty[b][r].init(128);  // the one consumer that reads the region's values
      }
      sm.valid_ready[b].init(16);  // the 16 producer threads that write the flags
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  if (wg == 2) {
    // ======================= producer =======================
    cutlass::arch::warpgroup_reg_dealloc<C::kProducerRegs>();
    const int chunk = t % 8;      // 16-byte chunk of a 128-byte tile row
    const int row0 = t / 8;       // rows row0 + 16 j, j < 4
    auto sQ = make_tensor(make_smem_ptr(sm.q), typename C::template Tiles<kTiles>{});
    bf16* const q_dst = &sQ(row0, chunk * 8);  // one swizzled base for every row and tile (see the one-item kernel)
    bf16* const kv_dst = q_dst - sm.q + sm.kv[0];
    const bf16* kv = static_cast<const bf16*>(p.kv) + chunk * 8;
    const bf16* src[2][4];  // [buffer][j] this thread's chunk of the gathered row
    bool ok[2][4];
    auto copy_region = [&](int buf, int tile_begin, int tile_end) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int tile = tile_begin; tile < tile_end; ++tile)
          cp_async_16_zfill_l2(kv_dst + buf * (C::kBlockKeys * kDqk) + j * 1024 + tile * 4096,
                               src[buf][j] + tile * 64, ok[buf][j]);
    };
    auto publish_valid = [&](int buf) {
      if (chunk == 0) {
#pragma unroll
        for (int j = 0; j < 4; ++j) sm.valid[buf][row0 + 16 * j] = ok[buf][j];
        sm.valid_ready[buf].arrive();
      }
    };
    int step_base = 0;
    for (int k = 0;; ++k) {
      // Item k's Q, once item k - 1's epilogue has read its output back out of the q buffer.
      auto load_q = [&] {
        if (k > 0) sm.q_empty.wait((k - 1) & 1);
        const bf16* q_rows = static_cast<const bf16*>(p.q) + it.q_idx * p.q_row_stride;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int r = row0 + 16 * j;
          const bool ok_q = it.head0 + r < p.h_q;
          const bf16* q_src = q_rows + (ok_q ? (int64_t)(it.head0 + r) * p.q_head_stride : 0) + chunk * 8;
#pragma unroll
          for (int tile = 0; tile < kTiles; ++tile)
            cp_async_16_zfill_l2(q_dst + j * 1024 + tile * 4096, q_src + tile * 64, ok_q);
        }
        cp_async_arrive(sm.q_ready);
      };
      // The first item's Q goes first, as in the one-item kernel (nothing to wait for); a later
      // item's after its first step's gathers, which the producer issues during the previous
      // item's epilogue (its q_ready then also covers those gathers: .noinc counts every earlier
      // cp.async of the thread).
      if (k == 0 || it.n_steps == 0) load_q();
      const int32_t* idx_row = p.indices + it.q_idx * p.indices_row_stride;
      for (int step = 0; step < it.n_steps; ++step) {
        const int phase = ((step_base + step) & 1) ^ 1;  // the first wait on each empty barrier passes
#pragma unroll
        for (int buf = 0; buf < 2; ++buf)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int key = (2 * step + buf) * C::kBlockKeys + row0 + 16 * j;
            const int idx = key < it.n_keys ? idx_row[key] : -1;
            ok[buf][j] = idx >= 0 && idx < p.s_kv;  // anything else is a masked, zero-filled row
            src[buf][j] = kv + (ok[buf][j] ? (int64_t)idx * p.kv_row_stride : 0);
          }
        // In the order the consumers read them: WG0 needs 0L then 0R, WG1 1R then 1L.
        sm.empty[0][0].wait(phase);
        publish_valid(0);  // WG0 masked the previous block 0 before freeing 0L
        copy_region(0, 0, kLeft);
        cp_async_arrive(sm.ready[0][0]);
        sm.empty[1][1].wait(phase);
        publish_valid(1);  // WG1 masked the previous block 1 before freeing 1R
        copy_region(1, kLeft, kTiles);
        cp_async_arrive(sm.ready[1][1]);
        sm.empty[0][1].wait(phase);
        copy_region(0, kLeft, kTiles);
        cp_async_arrive(sm.ready[0][1]);
        sm.empty[1][0].wait(phase);
        copy_region(1, 0, kLeft);
        cp_async_arrive(sm.ready[1][0]);
        if (k > 0 && step == 0) load_q();
      }
      if (!items.next()) break;
      step_base += it.n_steps;
      it = items.get(p, C::kBlockKeys);
    }
    cp_async_wait_all();
    return;
  }

  // ======================= consumers =======================
  // Item k's q_ready follows item k - 1's q_empty, which every consumer thread arrives on after its
  // epilogue: so everything a consumer reads in one item (the exchanged maxes and sums, P) is read
  // before the other consumer writes it in the next, however few steps that has.
  auto consumer = [&](auto wg_tag) {
    constexpr int kWg = decltype(wg_tag)::value;
    cutlass::arch::warpgroup_reg_alloc<C::kConsumerRegs>();
    int step_base = 0;
    for (int k = 0;; ++k) {
      consume<kDqk, kWg>(p.sm_scale, sm, it.n_steps, step_base, k & 1, PrefillEpilogue<kDqk, kWg>{p, sm, it.q_idx, it.head0});
      sm.q_empty.arrive();  // this thread's stores have read its output back out of the q buffer
      if (!items.next()) break;
      step_base += it.n_steps;
      it = items.get(p, C::kBlockKeys);
    }
  };
  if (wg == 0) consumer(Int<0>{});
  else consumer(Int<1>{});
#endif
}

}  // namespace sinkops::cuda::sm90
