// sinkops::cuda::window_attention_backward: the CUDA backend's backward of window attention. Its
// kernels are Hopper's (csrc/cuda/sm90/window_attention_bwd_sm90.cuh); elsewhere `unsupported`
// says why, and the backward of a CUDA forward runs on `auto`'s choice (docs/DECISIONS.md).
// Never syncs with the host.
#include <string>

#include "kernel_launch.cuh"
#include "sinkops/cuda_api.h"
#ifdef SINKOPS_SM90
#include "sm90/sm90_api.h"
#endif

namespace sinkops::cuda {

std::string window_attention_backward_unsupported(const WindowAttentionBackwardParams& p) {
  if (p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16) return "dtype must be bfloat16 or float16";
  if (p.h_k < 1 || p.h_q % p.h_k != 0) return "h_q must be a multiple of h_k";
  const DeviceInfo& info = device_info(current_device());
  if (std::string why = sm90_only_unavailable(info); !why.empty()) return why;
#ifdef SINKOPS_SM90
  return sm90::window_attention_backward_unsupported(p, info.smem_optin);
#else
  return "";  // not reached: a build without sm_90a kernels answered above
#endif
}

void window_attention_backward(const WindowAttentionBackwardParams& p, void* stream) {
  if (const std::string why = window_attention_backward_unsupported(p); !why.empty())
    throw Error("window_attention_backward (cuda): " + why);
  if (p.sink_mode != SinkMode::kNone && (p.sinks == nullptr || p.dsink_rows == nullptr))
    throw Error("window_attention_backward (cuda): sink_mode needs sinks and dsink_rows");
  if (p.out == nullptr || p.lse == nullptr || p.dout == nullptr || p.row_r == nullptr || p.row_delta == nullptr)
    throw Error("window_attention_backward (cuda): out, lse, dout and the row workspaces are required");
  // nothing attends: nothing launches and nothing is written (the gradients are all zeros then; the
  // caller writes them: window_attention_backward_params.h)
  if (p.batch <= 0 || p.max_seqlen_q <= 0 || p.max_seqlen_k <= 0 || p.total_q == 0 || p.total_k == 0 || p.h_q == 0)
    return;
#ifdef SINKOPS_SM90
  if (!sm90::window_attention_backward_aligned(p))
    throw Error("window_attention_backward (cuda): q, k, v, out, dout, dq, dk and dv must start 16-byte aligned");
  sm90::window_attention_backward(p, stream);
#endif
}

}  // namespace sinkops::cuda
