// Host side of one sparse MLA prefill tile config: picks the pipeline depth that fits the
// device's shared memory and launches. Included by the per-tile instantiation files
// (sparse_mla_prefill_h{16,32,64}.cu) so the three configs compile in parallel.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "kernel_launch.cuh"
#include "sparse_mla_prefill_kernel.cuh"

namespace sinkops::cuda::mla {

template <int kMTiles, int kStages>
void launch_prefill_config(const SparseMlaPrefillParams& p, cudaStream_t stream, int smem_bytes) {
  constexpr auto kernel = sparse_mla_prefill_kernel<kMTiles, kStages>;
  reserve_dynamic_smem<kernel>(smem_bytes, "sparse_mla_prefill");
  const dim3 grid(static_cast<unsigned>(p.s_q), static_cast<unsigned>((p.h_q + 16 * kMTiles - 1) / (16 * kMTiles)));
  SINKOPS_LAUNCH(kernel, grid, kPrefillThreads, smem_bytes, stream)(p);
  check_launch("sparse_mla_prefill");
}

// Double-buffered KV when it fits (H100/H200: 227 KB per block), else a single stage
// (A100's 163 KB cannot hold Q + two 64-row tiles at 64 heads).
template <int kMTiles>
void launch_prefill_tiles(const SparseMlaPrefillParams& p, cudaStream_t stream, int smem_optin) {
  const PrefillSmemLayout lay(kMTiles, 2, p.d_qk);
  if (lay.total(2) <= smem_optin) return launch_prefill_config<kMTiles, 2>(p, stream, lay.total(2));
  const PrefillSmemLayout lay1(kMTiles, 1, p.d_qk);
  if (lay1.total(1) <= smem_optin) return launch_prefill_config<kMTiles, 1>(p, stream, lay1.total(1));
  throw Error("sparse_mla_prefill: needs " + std::to_string(lay1.total(1)) +
              " bytes of shared memory per block, the device allows " + std::to_string(smem_optin));
}

void launch_prefill_h16(const SparseMlaPrefillParams& p, cudaStream_t stream, int smem_optin);
void launch_prefill_h32(const SparseMlaPrefillParams& p, cudaStream_t stream, int smem_optin);
void launch_prefill_h64(const SparseMlaPrefillParams& p, cudaStream_t stream, int smem_optin);

}  // namespace sinkops::cuda::mla
