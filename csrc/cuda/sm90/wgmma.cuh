// Hopper (sm_90a) building blocks shared by the sm90 kernels, on top of CuTe (the nvidia-cutlass
// wheel's headers): warpgroup MMA issue with accumulators in registers, named barriers, the
// zero-filling cp.async gather with an mbarrier arrival, and the register -> shared store of a
// bf16 accumulator tile (stmatrix). Only compiled for sm_90a (csrc/cuda/sm90/, build_cuda.py).
#pragma once
// N = 80 (and other multiples of 8 past the power-of-two set) for the window kernel's head dims.
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include <cstdint>

namespace sinkops::cuda::sm90 {

using namespace cute;
using bf16 = cutlass::bfloat16_t;
using Barrier = cutlass::arch::ClusterBarrier;  // an mbarrier in shared memory (one CTA here)

// The CuTe element type of a CUDA 16-bit type (the kernels' global pointers are CUDA types).
template <typename T>
struct CuteElement;
template <>
struct CuteElement<__nv_bfloat16> {
  using type = cutlass::bfloat16_t;
};
template <>
struct CuteElement<__half> {
  using type = cutlass::half_t;
};

// ---- warpgroup MMA -------------------------------------------------------------------------
// acc (+)= A B^T over the K mode of the operands; A and B in shared memory (descriptors).
// Issues the wgmmas and returns: the caller commits the batch and waits (warpgroup_wait<N>).
// Issue them unconditionally inside a loop: one wgmma issued under a branch made ptxas serialize
// every wgmma of the kernel (warning C7515, 20 HGMMA / 20 WARPGROUP.DEPBAR; bench/NOTES.md "Window
// backward v8"). tools/sass_check.sh prints both counts: read them before timing a new kernel.
template <class Mma, class TA, class TB, class TC>
__device__ __forceinline__ void wgmma_ss(Mma mma, const TA& sA, const TB& sB, TC& acc, bool clear,
                                         int thread_in_wg) {
  auto thr = mma.get_slice(thread_in_wg);
  Tensor fa = thr.partition_fragment_A(sA);
  Tensor fb = thr.partition_fragment_B(sB);
  warpgroup_fence_operand(acc);
  warpgroup_arrive();
  mma.accumulate_ = clear ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
  CUTLASS_PRAGMA_UNROLL
  for (int k = 0; k < size<2>(fa); ++k) {
    cute::gemm(mma, fa(_, _, k), fb(_, _, k), acc);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_fence_operand(acc);
}

// acc += A B^T with A in registers (a bf16 fragment laid out as the MMA's A operand).
template <class Mma, class TA, class TB, class TC>
__device__ __forceinline__ void wgmma_rs(Mma mma, TA& rA, const TB& sB, TC& acc, int thread_in_wg) {
  auto thr = mma.get_slice(thread_in_wg);
  Tensor fb = thr.partition_fragment_B(sB);
  warpgroup_fence_operand(rA);
  warpgroup_fence_operand(acc);
  warpgroup_arrive();
  mma.accumulate_ = GMMA::ScaleOut::One;
  CUTLASS_PRAGMA_UNROLL
  for (int k = 0; k < size<2>(rA); ++k) cute::gemm(mma, rA(_, _, k), fb(_, _, k), acc);
  warpgroup_fence_operand(acc);
  warpgroup_fence_operand(rA);
}

// Where value i of a thread's m64nN fp32 accumulator sits (PTX ISA, wgmma D fragment):
// row = 16 warp + lane / 4 + 8 ((i / 2) % 2), column = 8 (i / 4) + 2 (lane % 4) + i % 2.
__device__ __forceinline__ int acc_row(int half, int thread_in_wg) {
  return (thread_in_wg / 32) * 16 + half * 8 + (thread_in_wg % 32) / 4;
}
__device__ __forceinline__ int acc_col(int i, int thread_in_wg) {
  return 8 * (i / 4) + 2 * (thread_in_wg % 4) + (i & 1);
}

// The 16-bit copy of a 64 x N accumulator tile into shared memory with stmatrix; `rB` is laid out
// like the fp32 accumulator of Mma (the A-operand layout of the next MMA has the same order).
template <class Mma, class TR, class TS>
__device__ __forceinline__ void store_tile_stmatrix(const TR& rB, TS& sT, int thread_in_wg) {
  using Element = typename TR::value_type;  // a 16-bit type (bf16 or fp16)
  auto copy = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, Element>{}, Mma{});
  auto thr = copy.get_slice(thread_in_wg);
  cute::copy(copy, thr.retile_S(rB), thr.partition_D(sT));
}

// ---- barriers ------------------------------------------------------------------------------
// Named barriers (ids 1..15; 0 is __syncthreads). `threads` counts arriving and waiting threads.
__device__ __forceinline__ void bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- cp.async gather -------------------------------------------------------------------------
// 16 bytes global -> shared, zero-filled when !valid (nothing is read then), with a 256-byte L2
// prefetch hint: gathered rows are 1-1.2 KB of contiguous bytes. No L2 eviction policy: evict_last
// on the prefill's gathered rows (and evict_first on Q) measured level to -1 % (bench/NOTES.md
// "Prefill v1.2"). If one is wanted: pass .L2::cache_hint a 32-bit shared address made once per
// thread. From a generic pointer converted per call, ptxas 13.0 splits the address into a uniform
// base and a register ([R + UR0 + imm]) and then encodes the policy as an unset, odd uniform
// register (desc[UR1]): an illegal instruction on the H200.
__device__ __forceinline__ void cp_async_16_zfill_l2(uint32_t smem_addr, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gmem),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_16_zfill_l2(void* smem, const void* gmem, bool valid) {
  cp_async_16_zfill_l2(cast_smem_ptr_to_uint(smem), gmem, valid);
}
// The barrier gets one arrival once this thread's earlier cp.asyncs have landed (the barrier's
// expected count includes it: .noinc).
__device__ __forceinline__ void cp_async_arrive(Barrier& bar) {
  cutlass::arch::cpasync_barrier_arrive_noinc(reinterpret_cast<const uint64_t*>(&bar));
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
// 4 or 8 bytes global -> shared through L1 (.ca: the only cp.async of that size), zero-filled when !valid.
template <int kBytes>
__device__ __forceinline__ void cp_async_ca_zfill(void* smem, const void* gmem, bool valid) {
  static_assert(kBytes == 4 || kBytes == 8, "cp.async.ca sizes");
  const uint32_t dst = cast_smem_ptr_to_uint(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(gmem), "n"(kBytes),
               "r"(valid ? kBytes : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most kPending of this thread's committed cp.async groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// ---- 2-CTA clusters (the prefill's head-block pairs) -----------------------------------------
// The shared::cluster address of `local`'s counterpart in the other CTA of a 2-CTA cluster (the
// same offset: both CTAs lay out their shared memory alike).
__device__ __forceinline__ uint32_t peer_smem_addr(const void* local) {
  uint32_t addr;
  asm volatile(
      "{\n .reg .b32 rank;\n mov.u32 rank, %%cluster_ctarank;\n xor.b32 rank, rank, 1;\n"
      " mapa.shared::cluster.u32 %0, %1, rank;\n}\n"
      : "=r"(addr)
      : "r"(cast_smem_ptr_to_uint(local)));
  return addr;
}
// One arrival on the peer CTA's counterpart of `bar`.
__device__ __forceinline__ void arrive_on_peer(Barrier& bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(peer_smem_addr(&bar)) : "memory");
}
// A consumer thread's arrival on a buffer's `empty`; kPair: also one per warp on the peer's, whose
// producer sends into this CTA's copy of the buffer (the peer's `empty` counts 4 per warpgroup).
// Called by every lane of the warp once its reads of the buffer are done.
template <bool kPair>
__device__ __forceinline__ void release_buffer(Barrier& empty) {
  empty.arrive();
  if constexpr (kPair) {
    __syncwarp();
    if (threadIdx.x % 32 == 0) arrive_on_peer(empty);
  }
}
// `bytes` of this CTA's shared memory at `src` to the same offset in the peer CTA, by the TMA unit;
// completes them on the peer's counterpart of `bar` (which must expect them). 16-byte aligned, bytes
// a multiple of 16. Whoever wrote `src` through the generic proxy fences (fence_view_async_shared)
// on the way to this call.
__device__ __forceinline__ void bulk_copy_to_peer(const void* src, uint32_t bytes, Barrier& bar) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   peer_smem_addr(src)),
               "r"(cast_smem_ptr_to_uint(src)), "r"(bytes), "r"(peer_smem_addr(&bar))
               : "memory");
}

// ---- bulk reductions (the TMA unit) ---------------------------------------------------------
// gmem[0 .. bytes/4) += the floats at smem_addr, as one asynchronous bulk operation of the calling
// thread (16-byte aligned addresses, bytes a multiple of 16). Commit with tma_store_arrive() and wait
// for the shared memory's reads with tma_store_wait<N>() before reusing it; the writers of smem_addr
// fence (fence_view_async_shared) and synchronize with the issuing thread first.
__device__ __forceinline__ void bulk_reduce_add_f32(float* gmem, uint32_t smem_addr, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(gmem),
               "r"(smem_addr), "r"(bytes)
               : "memory");
}

}  // namespace sinkops::cuda::sm90
