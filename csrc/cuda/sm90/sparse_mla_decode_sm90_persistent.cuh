// The persistent form of the sm_90a FP8 decode (sparse_mla_decode_sm90.cuh) and the launch of
// either. One CTA per SM runs the (head block, split, row) items blockIdx.x, blockIdx.x +
// gridDim.x, ... in the one-item grid's order (head block fastest, then split, then row). Why: the
// one-item CTA's prologue (Q, the first block's indices, loads and conversion) was 22 % of WG0's
// time at batch 128 x 64 heads (bench/NOTES.md, decode v4); here the producer converts the next
// item's first two blocks while the consumers still finish the item before and its epilogue, and
// loads the next Q once both consumers' epilogues are done with the q buffer (q_empty).
// Status: a tuning variant (SINKOPS_DECODE_PERSISTENT=1), compiled, not yet run on a GPU; if it
// wins it replaces the one-item kernel, else it goes (bench/NOTES.md "Decode v7").
#pragma once
#include <algorithm>

#include "sparse_mla_decode_sm90.cuh"

#ifndef SINKOPS_DECODE_PERSISTENT
#define SINKOPS_DECODE_PERSISTENT 0
#endif

namespace sinkops::cuda::sm90 {

constexpr bool kDecodePersistent = SINKOPS_DECODE_PERSISTENT != 0;

// One item: a head block of one row's split, and its key range.
struct DecodeItem {
  int head0, split, row, key_begin, key_end, n_blocks;
};

__device__ __forceinline__ DecodeItem decode_item(const SparseMlaDecodeParams& p, int64_t item) {
  const int head_blocks = (p.h_q + 63) / 64;
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
// blocks of earlier items), Q's k-th load is item k's. Item k's q_ready follows item k - 1's
// q_empty, which every consumer thread arrives on after its epilogue: so whatever a consumer reads
// in one item (P, row_scale, out_scale) is read before the other writes it in the next, however
// few blocks that has.
template <KvCacheLayout L>
__global__ void __launch_bounds__(384, 1)
    sparse_mla_decode_sm90_persistent_kernel(const __grid_constant__ SparseMlaDecodeParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kDqk = KvLayout<L>::kDqk;
  using C = DecodeSm90Config<kDqk>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<typename C::Smem*>(smem_raw);
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  allow_dependents();  // the combine (a programmatic dependent) may be scheduled now; it waits for us
  const int64_t n_items = int64_t((p.h_q + 63) / 64) * p.num_splits * p.b * p.s_q;

  if (threadIdx.x == 0) {
    sm.q_ready.init(128);  // every producer thread's cp.async arrival
    sm.q_empty.init(256);  // every consumer thread, after its epilogue
    for (int b = 0; b < 2; ++b) {
      sm.ready[b].init(128);  // every producer thread, once its share is converted
      sm.empty[b].init(256);  // every consumer thread, once its PV of the buffer is done
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  int blk_base = 0;
  if (wg == 2) {
    cutlass::arch::warpgroup_reg_dealloc<kDecodeProducerRegs>();
    int k = 0;
    for (int64_t item = blockIdx.x; item < n_items; item += gridDim.x, ++k) {
      const DecodeItem it = decode_item(p, item);
      DecodeProducer<L> producer{Fp8BlockGather<L>(p, it.row, it.key_begin, it.key_end, sm.kv[0], t), sm};
      // The first item's Q goes first, as in the one-item kernel; a later item's once the item
      // before's epilogues are done with the q buffer, after this item's first two blocks (both
      // buffers), which the producer converts while that epilogue runs.
      auto load_q = [&] {
        if (k > 0) sm.q_empty.wait((k - 1) & 1);
        producer.load_q(it.head0);
      };
      if (k == 0 || it.n_blocks == 0) load_q();
      producer.run_blocks(it.n_blocks, blk_base, [&](int blk) {
        if (k > 0 && blk == min(1, it.n_blocks - 1)) load_q();
      });
      blk_base += it.n_blocks;
    }
    cp_async_wait_all();
  } else if (wg == 0) {
    cutlass::arch::warpgroup_reg_alloc<kDecodeWg0Regs>();
    int k = 0;
    for (int64_t item = blockIdx.x; item < n_items; item += gridDim.x, ++k) {
      const DecodeItem it = decode_item(p, item);
      decode_softmax_wg<kDqk>(p, sm, it.n_blocks, it.row, it.head0, it.split, blk_base, k & 1);
      sm.q_empty.arrive();
      blk_base += it.n_blocks;
    }
  } else {
    cutlass::arch::warpgroup_reg_dealloc<kDecodeWg1Regs>();
    for (int64_t item = blockIdx.x; item < n_items; item += gridDim.x) {
      const DecodeItem it = decode_item(p, item);
      decode_right_half_wg<kDqk>(p, sm, it.n_blocks, it.row, it.head0, it.split, blk_base);
      sm.q_empty.arrive();
      blk_base += it.n_blocks;
    }
  }
#endif
}

// Per-layout launch, instantiated in sparse_mla_decode_sm90_v4.cu / _v32.cu (they compile in parallel).
template <KvCacheLayout L>
void launch_decode_sm90(const SparseMlaDecodeParams& p, cudaStream_t stream) {
  constexpr int smem = DecodeSm90Config<KvLayout<L>::kDqk>::kSmemBytes;
  if constexpr (kDecodePersistent) {
    constexpr auto kernel = sparse_mla_decode_sm90_persistent_kernel<L>;
    reserve_dynamic_smem<kernel>(smem, "sparse_mla_decode (sm90)");
    const int64_t items = int64_t((p.h_q + 63) / 64) * p.num_splits * p.b * p.s_q;
    const int ctas = int(std::min<int64_t>(items, device_info(current_device()).sm_count));
    kernel<<<ctas, 384, smem, stream>>>(p);
  } else {
    constexpr auto kernel = sparse_mla_decode_sm90_kernel<L>;
    reserve_dynamic_smem<kernel>(smem, "sparse_mla_decode (sm90)");
    const dim3 grid((p.h_q + 63) / 64, p.num_splits, p.b * p.s_q);
    kernel<<<grid, 384, smem, stream>>>(p);
  }
  check_launch("sparse_mla_decode (sm90)");
}
extern template void launch_decode_sm90<KvCacheLayout::kV4>(const SparseMlaDecodeParams&, cudaStream_t);
extern template void launch_decode_sm90<KvCacheLayout::kV32>(const SparseMlaDecodeParams&, cudaStream_t);

}  // namespace sinkops::cuda::sm90
