// sinkops::cuda::sparse_mla_backward: the CUDA backend's backward of sparse MLA prefill, one chunk of
// queries per call (sparse_mla_backward_params.h). Its kernels are Hopper's
// (csrc/cuda/sm90/sparse_mla_backward_sm90.cuh); elsewhere `unsupported` says why, and the backward
// of a CUDA forward runs on `auto`'s choice (docs/DECISIONS.md). Never syncs with the host.
#include <cstdint>
#include <string>

#include "kernel_launch.cuh"
#include "sinkops/cuda_api.h"
#ifdef SINKOPS_SM90
#include "sm90/sm90_api.h"
#endif

namespace sinkops::cuda {

std::string sparse_mla_backward_unsupported(const SparseMlaBackwardParams& p) {
  if (p.d_qk != 512 && p.d_qk != 576) return "d_qk must be 512 or 576, got " + std::to_string(p.d_qk);
  if (p.d_v != 512) return "d_v must be 512, got " + std::to_string(p.d_v);
  if (p.h_q > 128) return "h_q must be <= 128 (the key gradients' head sum is one MMA), got " + std::to_string(p.h_q);
  // the softmax's exponent folds the scale in (the forward's sm90 rule)
  if (!(p.sm_scale > 0.f)) return "sm_scale must be > 0";
  // cp.async moves 16-byte chunks of q, kv, dout, out; dq is stored in bf16 pairs
  if (p.q_row_stride % 8 || p.q_head_stride % 8 || p.kv_row_stride % 8 || p.dout_row_stride % 8 ||
      p.dout_head_stride % 8 || p.out_row_stride % 8 || p.out_head_stride % 8)
    return "q, kv, out and dout rows must be 16-byte aligned";
  if (p.dq_row_stride % 2 || p.dq_head_stride % 2) return "dq rows must be 4-byte aligned";
  if (p.dkv_query_group < 1) return "dkv_query_group must be >= 1";
  if (p.stage_topk % 8 || p.stage_topk < p.topk) return "stage_topk must be topk rounded up to a multiple of 8";
  const DeviceInfo& info = device_info(current_device());
  if (std::string why = sm90_only_unavailable(info); !why.empty()) return why;
#ifdef SINKOPS_SM90
  if (sm90::sparse_mla_backward_smem_bytes(p.d_qk) > info.smem_optin)
    return "needs " + std::to_string(sm90::sparse_mla_backward_smem_bytes(p.d_qk)) +
           " bytes of shared memory per block, this GPU allows " + std::to_string(info.smem_optin);
#endif
  return "";
}

void sparse_mla_backward(const SparseMlaBackwardParams& p, void* stream) {
  if (const std::string why = sparse_mla_backward_unsupported(p); !why.empty())
    throw Error("sparse_mla_prefill_backward (cuda): " + why);
  if (p.out == nullptr || p.lse == nullptr || p.dout == nullptr || p.dq == nullptr || p.p_stage == nullptr ||
      p.dx_stage == nullptr)
    throw Error("sparse_mla_prefill_backward (cuda): out, lse, dout, dq and the stages are required");
  if (p.attn_sink != nullptr && p.dsink_rows == nullptr)
    throw Error("sparse_mla_prefill_backward (cuda): attn_sink needs dsink_rows");
  if (p.deterministic ? p.det_stage == nullptr : p.dkv_acc == nullptr)
    throw Error("sparse_mla_prefill_backward (cuda): the key gradients need dkv_acc (or det_stage, deterministic)");
  if (p.s0 < 0 || p.chunk_rows < 0 || p.s0 + p.chunk_rows > p.s_q)
    throw Error("sparse_mla_prefill_backward (cuda): the chunk [s0, s0 + chunk_rows) must lie in [0, s_q)");
  if (p.chunk_rows > 65535)
    throw Error("sparse_mla_prefill_backward (cuda): chunk_rows must be <= 65535 (the chunking's bound)");
  if ((p.topk + 63) / 64 * p.chunk_rows > 0x7fffffffLL)
    throw Error("sparse_mla_prefill_backward (cuda): ceil(topk / 64) * chunk_rows must be < 2^31 (the dkv grid)");
  if (p.s_kv > 0x7fffffffLL) throw Error("sparse_mla_prefill_backward: s_kv must be < 2^31 (int32 indices)");
  for (const void* ptr : {p.q, p.kv, static_cast<const void*>(p.out), p.dout})
    if (reinterpret_cast<uintptr_t>(ptr) & 15)
      throw Error("sparse_mla_prefill_backward (cuda): q, kv, out and dout must start 16-byte aligned");
  if (reinterpret_cast<uintptr_t>(p.dq) & 3) throw Error("sparse_mla_prefill_backward (cuda): dq must be 4-byte aligned");
  if (reinterpret_cast<uintptr_t>(p.dkv_acc) & 15)  // the bulk reductions' destinations
    throw Error("sparse_mla_prefill_backward (cuda): dkv_acc must start 16-byte aligned");
  if (p.chunk_rows == 0 || p.h_q == 0 || p.topk == 0) return;
#ifdef SINKOPS_SM90
  sm90::sparse_mla_backward(p, stream);
#else
  (void)stream;
#endif
}

}  // namespace sinkops::cuda
