// sinkops::cuda::window_attention_fwd: validates what only the CUDA backend knows (dtype, head
// dim, shared memory of this GPU), picks the instantiation (static_switch.cuh) and the GQA
// folding, and launches. Never syncs with the host.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernel_launch.cuh"
#include "sinkops/cuda_api.h"
#include "window_attention_launch.cuh"
#ifdef SINKOPS_SM90
#include "sm90/sm90_api.h"
#endif

namespace sinkops::cuda {
namespace {

using window_attention::LaunchShape;
using window_attention::TileInfo;

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

template <typename T, int kHeadDim, typename Sink>
void run(const WindowAttentionParams& p, const TileInfo& tile, cudaStream_t stream) {
  LaunchShape s = window_attention::fold_heads(p, tile.block_m, tile.warps);  // <= one head per warp
  // 16-byte cp.async needs every row start 16-byte aligned: pointers, strides and dims % 8.
  const bool vec = aligned16(p.q) && aligned16(p.k) && aligned16(p.v) && aligned16(p.out) && p.d % 8 == 0 &&
                   p.d_v % 8 == 0 && p.q_row_stride % 8 == 0 && p.q_head_stride % 8 == 0 &&
                   p.k_row_stride % 8 == 0 && p.k_head_stride % 8 == 0 && p.v_row_stride % 8 == 0 &&
                   p.v_head_stride % 8 == 0 && p.out_row_stride % 8 == 0 && p.out_head_stride % 8 == 0;
  s.vec_loads = vec ? 1 : 0;
  const dim3 grid = window_attention::launch_grid(p, s);
  window_attention::launch<T, kHeadDim, Sink>(p, s, grid, stream);
}

// The one place the kernel family is chosen: the Hopper warpgroup-MMA kernel for d, d_v <= 128
// with 16-byte aligned rows (sm90/window_attention_sm90.cu), else the mma.sync kernel.
bool takes_sm90(const WindowAttentionParams& p, const DeviceInfo& info) {
#ifdef SINKOPS_SM90
  return use_sm90(info) && sm90::window_attention_sm90_takes(p, info.smem_optin);
#else
  (void)p, (void)info;
  return false;
#endif
}

}  // namespace

std::string window_attention_path(const WindowAttentionParams& p) {
  return takes_sm90(p, device_info(current_device())) ? "sm90" : "sm80";
}

std::string window_attention_unsupported(const WindowAttentionParams& p) {
  if (p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16) return "dtype must be bfloat16 or float16";
  if (p.d < 1 || p.d > 256 || p.d_v < 1 || p.d_v > 256)
    return "head dims must be in 1..256, got d=" + std::to_string(p.d) + " d_v=" + std::to_string(p.d_v);
  if (p.h_k < 1 || p.h_q % p.h_k != 0) return "h_q must be a multiple of h_k";
  const int d = p.d > p.d_v ? p.d : p.d_v;
  const int smem_optin = device_info(current_device()).smem_optin;
  std::string why;
  head_dim_switch(window_attention::CompiledHeadDims{}, d, "window_attention", [&](auto head_dim) {
    const TileInfo tile = window_attention::tile_info<decltype(head_dim)::value>();
    if (tile.smem_bytes > smem_optin)
      why = "head dim " + std::to_string(d) + " needs " + std::to_string(tile.smem_bytes) +
            " bytes of shared memory per block, this GPU allows " + std::to_string(smem_optin);
  });
  return why;
}

void window_attention_fwd(const WindowAttentionParams& p, void* stream) {
  if (const std::string why = window_attention_unsupported(p); !why.empty())
    throw Error("window_attention (cuda): " + why);
  if (p.sink_mode != SinkMode::kNone && p.sinks == nullptr)
    throw Error("window_attention (cuda): sink_mode needs a sinks tensor");
  if (p.batch <= 0 || p.max_seqlen_q <= 0 || p.total_q == 0 || p.h_q == 0) return;  // nothing to write
#ifdef SINKOPS_SM90
  if (takes_sm90(p, device_info(current_device())) && sm90::window_attention_sm90_aligned(p))
    return sm90::window_attention(p, stream);
#endif
  const int d = p.d > p.d_v ? p.d : p.d_v;
  dtype_switch(p.dtype, "window_attention", [&](auto t) {
    using T = typename decltype(t)::type;
    head_dim_switch(window_attention::CompiledHeadDims{}, d, "window_attention (cuda)", [&](auto head_dim) {
      constexpr int kHeadDim = decltype(head_dim)::value;
      const TileInfo tile = window_attention::tile_info<kHeadDim>();
      sink_switch(p.sink_mode, [&](auto sink) {
        run<T, kHeadDim, typename decltype(sink)::type>(p, tile, static_cast<cudaStream_t>(stream));
      });
    });
  });
}

}  // namespace sinkops::cuda
