// Launcher of sparse MLA prefill (cuda_api.h): validates what only the kernel knows, picks
// the head tile, launches on the caller's stream. Never synchronizes with the host.
#include <cuda_runtime.h>

#include <string>

#include "sinkops/cuda_api.h"
#include "sparse_mla_prefill_launch.cuh"

namespace sinkops::cuda {

namespace {
bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }
}  // namespace

void sparse_mla_prefill_fwd(const SparseMlaPrefillParams& p, void* stream) {
  if (p.d_qk != 512 && p.d_qk != 576)
    throw Error("sparse_mla_prefill: d_qk must be 512 or 576, got " + std::to_string(p.d_qk));
  if (p.d_v != mla::kValueDim)
    throw Error("sparse_mla_prefill: d_v must be 512, got " + std::to_string(p.d_v));
  if (p.s_q > 0x7fffffffLL) throw Error("sparse_mla_prefill: s_q must be < 2^31");
  if (p.s_kv > 0x7fffffffLL) throw Error("sparse_mla_prefill: s_kv must be < 2^31 (int32 indices)");
  if (p.s_q == 0 || p.h_q == 0) return;
  // cp.async moves 16-byte chunks; stores write bf16 pairs.
  if (!aligned16(p.q) || !aligned16(p.kv) || p.q_row_stride % 8 || p.q_head_stride % 8 ||
      p.kv_row_stride % 8)
    throw Error("sparse_mla_prefill: q and kv rows must be 16-byte aligned");
  if ((reinterpret_cast<uintptr_t>(p.out) & 3) || p.out_row_stride % 2 || p.out_head_stride % 2)
    throw Error("sparse_mla_prefill: out rows must be 4-byte aligned");

  int device = 0, smem_optin = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  mla::check_launch("sparse_mla_prefill: device query");

  auto s = static_cast<cudaStream_t>(stream);
  // Smallest tile that holds the heads; > 32 heads run as ceil(h_q / 64) CTAs of 64 heads per row.
  if (p.h_q <= 16) return mla::launch_prefill_h16(p, s, smem_optin);
  if (p.h_q <= 32) return mla::launch_prefill_h32(p, s, smem_optin);
  mla::launch_prefill_h64(p, s, smem_optin);
}

}  // namespace sinkops::cuda
