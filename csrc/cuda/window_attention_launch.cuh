// Launch of one (dtype, padded head dim, sink policy) instantiation of the window attention
// kernel. window_attention.cu sees only the declaration of `launch`; each
// window_attention_hdim<D>.cu includes the kernel and instantiates its head dim, so the
// instantiations compile in parallel and the dispatcher compiles no kernel.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "sinkops/window_attention_params.h"
#include "static_switch.cuh"

namespace sinkops::cuda::window_attention {

// Head dims with a compiled kernel, ascending; window_attention.cu rounds max(d, d_v) up to one
// of these. Adding one = one entry here + its instantiation file window_attention_hdim<D>.cu.
using CompiledHeadDims = HeadDims<64, 80, 96, 128, 192, 256>;

// Runtime shape of the launch, computed once on the host (window_attention.cu).
struct LaunchShape {
  int group;               // h_q / h_k
  int heads_per_cta;       // Hc: query heads of one kv head folded into M (divides group)
  int positions_per_cta;   // P = kBlockM / Hc (multiple of 16)
  int head_blocks_per_kv;  // group / Hc
  int vec_loads;           // 1: every row start is 16-byte aligned and d, d_v % 8 == 0 -> cp.async
  float scale_log2;        // scale * log2(e): logits are kept in log2 units
  int steps_per_cta;       // sm90 only: consecutive blocks of P positions one CTA computes (>= 1)
};

// The GQA folding and the grid, for a CTA of `cta_rows` rows (both kernel families): the largest
// power-of-two share (<= max_heads) of the group goes into M, so one K/V tile in shared memory
// serves every folded head; the grid is (query blocks, kv heads x head blocks, segments), and
// segments beyond gridDim.z are served by the kernels' loop over the batch.
inline LaunchShape fold_heads(const WindowAttentionParams& p, int cta_rows, int max_heads) {
  LaunchShape s{};
  s.group = p.h_q / p.h_k;
  s.heads_per_cta = 1;
  while (s.heads_per_cta * 2 <= max_heads && s.group % (s.heads_per_cta * 2) == 0) s.heads_per_cta *= 2;
  s.positions_per_cta = cta_rows / s.heads_per_cta;
  s.head_blocks_per_kv = s.group / s.heads_per_cta;
  s.vec_loads = 1;
  s.scale_log2 = p.scale * sink::kLog2e;  // logits are kept in log2 units
  s.steps_per_cta = 1;
  return s;
}
inline dim3 launch_grid(const WindowAttentionParams& p, const LaunchShape& s) {
  const int64_t m_blocks = (int64_t(p.max_seqlen_q) + s.positions_per_cta - 1) / s.positions_per_cta;
  const int64_t head_blocks = int64_t(p.h_k) * s.head_blocks_per_kv;
  if (m_blocks > 0x7fffffff || head_blocks > 65535) throw Error("window_attention: grid too large");
  return dim3(static_cast<unsigned>(m_blocks), static_cast<unsigned>(head_blocks),
              static_cast<unsigned>(p.batch < 65535 ? p.batch : 65535));
}

// Tile facts the host needs before launching (rows per CTA, shared memory), per head dim.
struct TileInfo {
  int block_m;     // CTA rows = positions x folded heads
  int warps;
  int smem_bytes;
};
template <int kHeadDim>
TileInfo tile_info();

template <typename T, int kHeadDim, typename Sink>
void launch(const WindowAttentionParams& p, const LaunchShape& shape, dim3 grid, cudaStream_t stream);

}  // namespace sinkops::cuda::window_attention
