// Launcher of sparse MLA prefill (cuda_api.h): validates what only the kernel knows, picks
// the head tile, launches on the caller's stream. Never synchronizes with the host.
#include <cuda_runtime.h>

#include <string>

#include "kernel_launch.cuh"
#include "sinkops/cuda_api.h"
#include "sparse_mla_prefill_launch.cuh"
#ifdef SINKOPS_SM90
#include "sm90/sm90_api.h"
#endif

namespace sinkops::cuda {

namespace {
bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }
}  // namespace

// The one place the kernel family is chosen. Hopper: warpgroup MMA over 64-head tiles above 32
// heads (at <= 32 that tile is mostly padding: the few-heads kernel below takes them); its rows are
// stored in 16-byte chunks. Its softmax takes the row max on raw logits (the scale folds into the
// exponent), which needs sm_scale > 0; any other scale (0, negative, NaN) runs the sm80 kernel.
static bool takes_sm90(const SparseMlaPrefillParams& p, const DeviceInfo& info) {
#ifdef SINKOPS_SM90
  return use_sm90(info) && p.h_q > 32 && p.sm_scale > 0.f && p.out_row_stride % 8 == 0 && p.out_head_stride % 8 == 0 &&
         sm90::sparse_mla_prefill_smem_bytes(p.d_qk) <= info.smem_optin;
#else
  (void)p, (void)info;
  return false;
#endif
}

// Hopper at <= 32 heads: the few-heads kernel (keys in the MMA's M, 8 / 16 / 32 heads in N:
// nothing padded; bench/NOTES.md "Sparse prefill at few heads"); its rows are stored in 16-byte chunks.
static bool takes_sm90_few_heads(const SparseMlaPrefillParams& p, const DeviceInfo& info) {
#ifdef SINKOPS_SM90
  return use_sm90(info) && p.h_q <= sm90::sparse_mla_prefill_few_heads_max() && p.out_row_stride % 8 == 0 &&
         p.out_head_stride % 8 == 0 && sm90::sparse_mla_prefill_few_heads_smem_bytes(p.d_qk, p.h_q) <= info.smem_optin;
#else
  (void)p, (void)info;
  return false;
#endif
}

std::string sparse_mla_prefill_path(const SparseMlaPrefillParams& p) {
  const DeviceInfo& info = device_info(current_device());
  return takes_sm90(p, info) ? "sm90" : takes_sm90_few_heads(p, info) ? "sm90-few-heads" : "sm80";
}

// Heads per CTA tile: the smallest of 16 / 32 / 64 that holds h_q (more heads: ceil(h_q / 64) CTAs).
static int m_tiles(int h_q) { return h_q <= 16 ? 1 : (h_q <= 32 ? 2 : 4); }

std::string sparse_mla_prefill_unsupported(const SparseMlaPrefillParams& p) {
  if (p.d_qk != 512 && p.d_qk != 576) return "d_qk must be 512 or 576, got " + std::to_string(p.d_qk);
  if (p.d_v != mla::kValueDim) return "d_v must be 512, got " + std::to_string(p.d_v);
  // cp.async moves 16-byte chunks; stores write bf16 pairs.
  if (p.q_row_stride % 8 || p.q_head_stride % 8 || p.kv_row_stride % 8) return "q and kv rows must be 16-byte aligned";
  if (p.out_row_stride % 2 || p.out_head_stride % 2) return "out rows must be 4-byte aligned";
  const int need = mla::PrefillSmemLayout(m_tiles(p.h_q), 1, p.d_qk).total(1);
  const int smem_optin = device_info(current_device()).smem_optin;
  if (need > smem_optin)
    return "needs " + std::to_string(need) + " bytes of shared memory per block, this GPU allows " +
           std::to_string(smem_optin);
  return "";
}

void sparse_mla_prefill_fwd(const SparseMlaPrefillParams& p, void* stream) {
  if (const std::string why = sparse_mla_prefill_unsupported(p); !why.empty())
    throw Error("sparse_mla_prefill (cuda): " + why);
  if (p.s_q > 0x7fffffffLL) throw Error("sparse_mla_prefill: s_q must be < 2^31");
  if (p.s_kv > 0x7fffffffLL) throw Error("sparse_mla_prefill: s_kv must be < 2^31 (int32 indices)");
  if (p.s_q == 0 || p.h_q == 0) return;
  if (!aligned16(p.q) || !aligned16(p.kv)) throw Error("sparse_mla_prefill: q and kv rows must be 16-byte aligned");
  if (reinterpret_cast<uintptr_t>(p.out) & 3) throw Error("sparse_mla_prefill: out rows must be 4-byte aligned");

  const DeviceInfo& info = device_info(current_device());
#ifdef SINKOPS_SM90
  const bool out16 = !(reinterpret_cast<uintptr_t>(p.out) & 15);
  if (takes_sm90(p, info) && out16) return sm90::sparse_mla_prefill(p, stream);
  if (takes_sm90_few_heads(p, info) && out16) return sm90::sparse_mla_prefill_few_heads(p, stream);
#endif
  const int smem_optin = info.smem_optin;
  auto s = static_cast<cudaStream_t>(stream);
  switch (m_tiles(p.h_q)) {
    case 1: return mla::launch_prefill_h16(p, s, smem_optin);
    case 2: return mla::launch_prefill_h32(p, s, smem_optin);
    default: return mla::launch_prefill_h64(p, s, smem_optin);
  }
}

}  // namespace sinkops::cuda
