// sinkops::cuda::window_attention_fwd: validates what only the CUDA backend knows (dtype, head
// dim), picks the instantiation and the GQA folding, and launches. Never syncs with the host.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "sinkops/cuda_api.h"
#include "window_attention_launch.cuh"

namespace sinkops::cuda {
namespace {

using window_attention::LaunchShape;
using window_attention::Traits;

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

template <typename T, int kHeadDim>
void run(const WindowAttentionParams& p, cudaStream_t stream) {
  using Tr = Traits<kHeadDim>;
  LaunchShape s{};
  s.group = p.h_q / p.h_k;
  // Fold the largest power-of-two share of the GQA group into M (<= one head per warp), so one
  // K/V tile in smem serves every folded head.
  s.heads_per_cta = 1;
  while (s.heads_per_cta * 2 <= Tr::kWarps && s.group % (s.heads_per_cta * 2) == 0) s.heads_per_cta *= 2;
  s.positions_per_cta = Tr::kBlockM / s.heads_per_cta;
  s.head_blocks_per_kv = s.group / s.heads_per_cta;
  // 16-byte cp.async needs every row start 16-byte aligned: pointers, strides and dims % 8.
  const bool vec = aligned16(p.q) && aligned16(p.k) && aligned16(p.v) && aligned16(p.out) && p.d % 8 == 0 &&
                   p.d_v % 8 == 0 && p.q_row_stride % 8 == 0 && p.q_head_stride % 8 == 0 &&
                   p.k_row_stride % 8 == 0 && p.k_head_stride % 8 == 0 && p.v_row_stride % 8 == 0 &&
                   p.v_head_stride % 8 == 0 && p.out_row_stride % 8 == 0 && p.out_head_stride % 8 == 0;
  s.vec_loads = vec ? 1 : 0;
  s.scale_log2 = p.scale * 1.44269504088896340736f;
  const int64_t m_blocks = (int64_t(p.max_seqlen_q) + s.positions_per_cta - 1) / s.positions_per_cta;
  const int64_t head_blocks = int64_t(p.h_k) * s.head_blocks_per_kv;
  if (m_blocks > 0x7fffffff || head_blocks > 65535) throw Error("window_attention: grid too large");
  // Segments beyond gridDim.z are served by the kernel's grid-stride loop over the batch.
  const dim3 grid(static_cast<unsigned>(m_blocks), static_cast<unsigned>(head_blocks),
                  static_cast<unsigned>(p.batch < 65535 ? p.batch : 65535));
  window_attention::launch<T, kHeadDim>(p, s, grid, stream);
}

template <typename T>
void run_head_dim(const WindowAttentionParams& p, cudaStream_t stream) {
  const int d = p.d > p.d_v ? p.d : p.d_v;
  if (d <= 64) return run<T, 64>(p, stream);
  if (d <= 80) return run<T, 80>(p, stream);
  if (d <= 96) return run<T, 96>(p, stream);
  if (d <= 128) return run<T, 128>(p, stream);
  return run<T, 256>(p, stream);
}

}  // namespace

void window_attention_fwd(const WindowAttentionParams& p, void* stream) {
  if (p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16)
    throw Error("window_attention (cuda): dtype must be bfloat16 or float16");
  if (p.d < 1 || p.d > 256 || p.d_v < 1 || p.d_v > 256)
    throw Error("window_attention (cuda): head dims must be in 1..256, got d=" + std::to_string(p.d) +
                " d_v=" + std::to_string(p.d_v));
  if (p.h_k < 1 || p.h_q % p.h_k != 0) throw Error("window_attention (cuda): h_q must be a multiple of h_k");
  if (p.sink_mode != SinkMode::kNone && p.sinks == nullptr)
    throw Error("window_attention (cuda): sink_mode needs a sinks tensor");
  if (p.batch <= 0 || p.max_seqlen_q <= 0 || p.total_q == 0 || p.h_q == 0) return;  // nothing to write
  auto s = static_cast<cudaStream_t>(stream);
  if (p.dtype == DType::kBFloat16)
    run_head_dim<__nv_bfloat16>(p, s);
  else
    run_head_dim<__half>(p, s);
}

}  // namespace sinkops::cuda
