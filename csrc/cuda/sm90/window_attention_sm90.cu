// Launcher of the sm_90a window attention kernel (window_attention_sm90.cuh): the GQA folding,
// the grid and the instantiation. The portable entry point (csrc/cuda/window_attention.cu) has
// validated the params and decides when this runs (window_attention_sm90_takes).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "../kernel_launch.cuh"
#include "../static_switch.cuh"
#include "sm90_api.h"
#include "window_attention_sm90_launch.cuh"

namespace sinkops::cuda::sm90 {

namespace {
bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }

// What steps_per_cta needs to know of a launch: the window, the sizes the host knows, the chains
// of steps per segment (kv heads x head blocks) and a step's positions.
struct StepChains {
  int window_left, window_right, max_seqlen_q, batch;
  int64_t total_q, heads;
  int positions;
};

// Steps (blocks of P positions) per CTA: when consecutive steps share K/V tiles (a narrow window),
// each (segment, head block) is cut into as few equal runs of steps as fill the GPU's CTA slots
// once, so each CTA's first loads are paid once, every later step's Q and new tiles land while
// the step before computes, and shared tiles are read once; else one step per CTA (the kernel
// needs that). Host-known sizes only (max_seqlen_q, not the segments' lengths, which are on the
// device). SINKOPS_WA90_STEPS=n forces n where steps may share tiles (tests: several steps per CTA
// at small shapes), for the forward and the backward's dq kernel.
int steps_per_cta(const StepChains& c, int ctas_per_sm, int stages) {
  if (!steps_share_tiles(c.window_left, c.window_right, c.positions, stages)) return 1;
  const int64_t steps = (int64_t(c.max_seqlen_q) + c.positions - 1) / c.positions;
  if (const char* env = std::getenv("SINKOPS_WA90_STEPS"); env != nullptr && std::atoi(env) > 0)
    return int(std::min<int64_t>(std::atoi(env), steps));
  const int64_t slots = int64_t(ctas_per_sm) * device_info(current_device()).sm_count;
  // Runs per (segment, head block) chain for one wave of equal segments; at most the steps that
  // all tokens make per slot, so that one long segment among short ones still spreads out.
  const int64_t runs = std::clamp<int64_t>(slots / (int64_t(c.batch) * c.heads), 1, steps);
  const int64_t total = ((c.total_q + c.positions - 1) / c.positions) * c.heads;
  // (the chain's own split unless it is well above that: one wave of long CTAs beats two of
  // half-length ones, which pay their first loads twice)
  const int64_t per_chain = (steps + runs - 1) / runs, per_slot = std::max<int64_t>(1, (total + slots - 1) / slots);
  const int64_t per_cta = per_chain * 4 <= per_slot * 5 ? per_chain : per_slot;
  const int64_t even_runs = (steps + per_cta - 1) / per_cta;  // equal runs: no short CTA behind long ones
  return int((steps + even_runs - 1) / even_runs);
}

// The wide-window kernel for windows whose consecutive blocks cannot share key tiles, where it
// was measured faster (bench/NOTES.md "Window v8", H200): full attention d 128 809 -> 553-560 µs;
// at d 64 full attention is level (471 -> 467) and a bounded +-256 window slower (251 -> 300: its
// 128-key tiles compute ~35 % more keys than the rows see, and the narrow kernel's one-step twin
// runs 2 CTAs x 2 warpgroups), so at d <= 80 only windows with an unbounded side take it; from
// d 96 (no one-step twin) every window that cannot share tiles does. SINKOPS_WA90_WIDE=0 / 1
// forces the narrow / the wide kernel for every window (tests and tuning).
bool use_wide_kernel(const WindowAttentionParams& p, int head_dim, bool steps_share) {
  if (const char* env = std::getenv("SINKOPS_WA90_WIDE"); env != nullptr && *env != 0) return *env == '1';
  return !steps_share && (head_dim > 80 || p.window_left < 0 || p.window_right < 0);
}
}  // namespace

bool window_attention_sm90_takes(const WindowAttentionParams& p, int smem_optin) {
  const int d = p.d > p.d_v ? p.d : p.d_v;
  if (d > 128 || p.d % 8 || p.d_v % 8 || p.h_k < 1 || p.h_q % p.h_k) return false;
  // The row max and the masks run on raw logits, scaled in the exponent's FFMA: needs scale > 0.
  if (!(p.scale > 0.f) || !std::isfinite(p.scale * sink::kLog2e)) return false;
  // cp.async and the output stores move 16-byte chunks: every row start 16-byte aligned.
  // Offsets inside a step are 32-bit: (position + head) < 256 rows x stride < 2^23 fit int32.
  for (int64_t stride : {p.q_row_stride, p.q_head_stride, p.k_row_stride, p.k_head_stride, p.v_row_stride,
                         p.v_head_stride, p.out_row_stride, p.out_head_stride})
    if (stride % 8 || stride < 0 || stride >= (int64_t(1) << 23)) return false;
  bool fits = false;
  head_dim_switch(Sm90WindowHeadDims{}, d, "window_attention (sm90)", [&](auto head_dim) {
    constexpr int kHeadDim = decltype(head_dim)::value;
    fits = window_attention_tiling<kHeadDim, true>().smem_bytes <= smem_optin &&
           window_attention_wide_tiling<kHeadDim>().smem_bytes <= smem_optin;
    if constexpr (kHasOneStepKernel<kHeadDim>)
      fits = fits && window_attention_tiling<kHeadDim, false>().smem_bytes <= smem_optin;
  });
  return fits;
}

bool window_attention_sm90_aligned(const WindowAttentionParams& p) {
  return aligned16(p.q) && aligned16(p.k) && aligned16(p.v) && aligned16(p.out);
}

void window_attention(const WindowAttentionParams& p, void* stream) {
  const int d = p.d > p.d_v ? p.d : p.d_v;
  auto st = static_cast<cudaStream_t>(stream);
  head_dim_switch(Sm90WindowHeadDims{}, d, "window_attention (sm90)", [&](auto head_dim) {
    constexpr int kHeadDim = decltype(head_dim)::value;
    // The wide-window kernel where use_wide_kernel says; else the streaming kernel when its steps
    // share K/V tiles, or where it has no one-step twin (its steps are one each then); else the
    // one-step kernel. Up to 64 folded heads: a warpgroup's rows.
    const Sm90WindowTiling streaming = window_attention_tiling<kHeadDim, true>();
    window_attention::LaunchShape s = window_attention::fold_heads(p, streaming.cta_rows, 64);
    const bool share = steps_share_tiles(p.window_left, p.window_right, s.positions_per_cta, streaming.stages);
    const bool wide = use_wide_kernel(p, kHeadDim, share);
    bool stream = true;
    if (wide) {
      s = window_attention::fold_heads(p, window_attention_wide_tiling<kHeadDim>().cta_rows, 64);
    } else if constexpr (kHasOneStepKernel<kHeadDim>) {
      stream = share;
      if (!stream) s = window_attention::fold_heads(p, window_attention_tiling<kHeadDim, false>().cta_rows, 64);
    }
    const StepChains chains{p.window_left, p.window_right, p.max_seqlen_q, p.batch,
                            p.total_q,     int64_t(p.h_k) * s.head_blocks_per_kv, s.positions_per_cta};
    s.steps_per_cta = stream && !wide ? steps_per_cta(chains, streaming.ctas_per_sm, streaming.stages) : 1;
    dim3 grid = window_attention::launch_grid(p, s);
    grid.x = (grid.x + s.steps_per_cta - 1) / s.steps_per_cta;
    dtype_switch(p.dtype, "window_attention (sm90)", [&](auto t) {
      using T = typename decltype(t)::type;
      sink_switch(p.sink_mode, [&](auto sink) {
        using Sink = typename decltype(sink)::type;
        if (wide) return launch_window_attention_wide<T, kHeadDim, Sink>(p, s, grid, st);
        if constexpr (kHasOneStepKernel<kHeadDim>) {
          if (!stream) return launch_window_attention<T, kHeadDim, Sink, false>(p, s, grid, st);
        }
        launch_window_attention<T, kHeadDim, Sink, true>(p, s, grid, st);
      });
    });
  });
}

// ---------------------------------------------------------------------------------- backward

std::string window_attention_backward_unsupported(const WindowAttentionBackwardParams& p, int smem_optin) {
  const int d = p.d > p.d_v ? p.d : p.d_v;
  if (p.d < 1 || p.d_v < 1 || d > 128 || p.d % 8 || p.d_v % 8)
    return "head dims must be multiples of 8 up to 128, got d=" + std::to_string(p.d) + " d_v=" + std::to_string(p.d_v);
  const int group = p.h_q / p.h_k;
  if (group & (group - 1)) return "h_q / h_k must be a power of two, got " + std::to_string(group);
  if (!std::isfinite(p.scale * sink::kLog2e)) return "softmax_scale must be finite";
  // cp.async and the row-term loads move 16-byte chunks: every row start 16-byte aligned.
  for (int64_t stride : {p.q_row_stride, p.q_head_stride, p.k_row_stride, p.k_head_stride, p.v_row_stride,
                         p.v_head_stride, p.out_row_stride, p.out_head_stride, p.dout_row_stride, p.dout_head_stride,
                         p.dq_row_stride, p.dq_head_stride, p.dk_row_stride, p.dk_head_stride, p.dv_row_stride,
                         p.dv_head_stride})
    if (stride % 8 || stride < 0 || stride >= (int64_t(1) << 23))  // tile offsets are 32-bit
      return "every row / head stride must be a multiple of 8 elements (16 bytes) below 2^23";
  if (int64_t(p.h_q) > 65535 * int64_t(group < 64 ? group : 64)) return "too many heads for the grid";
  int smem = 0;
  head_dim_switch(Sm90WindowHeadDims{}, d, "window_attention_backward (sm90)",
                  [&](auto head_dim) { smem = window_attention_bwd_smem_bytes<decltype(head_dim)::value>(); });
  if (smem > smem_optin) return "needs " + std::to_string(smem) + " bytes of shared memory per block";
  return "";
}

bool window_attention_backward_aligned(const WindowAttentionBackwardParams& p) {
  for (const void* ptr : {p.q, p.k, p.v, p.dout, static_cast<const void*>(p.out), static_cast<const void*>(p.dq),
                          static_cast<const void*>(p.dk), static_cast<const void*>(p.dv)})
    if (!aligned16(ptr)) return false;
  return true;
}

void window_attention_backward(const WindowAttentionBackwardParams& p, void* stream) {
  const int d = p.d > p.d_v ? p.d : p.d_v;
  WindowBwdShape s{};
  s.group = p.h_q / p.h_k;
  s.hc = s.group < 64 ? s.group : 64;
  s.pw = 64 / s.hc;
  s.head_chunks = s.group / s.hc;
  s.scale_log2 = p.scale * sink::kLog2e;
  s.steps = 1;
  s.stream = 0;
  WindowBwdShape dq = s, dkdv = s;
  dkdv.blocks = int((int64_t(p.max_seqlen_k) + 63) / 64);
  const int batch_z = p.batch < 65535 ? p.batch : 65535;  // segments past grid z: the kernels loop
  head_dim_switch(Sm90WindowHeadDims{}, d, "window_attention_backward (sm90)", [&](auto head_dim) {
    constexpr int kHeadDim = decltype(head_dim)::value;
    // dq: the streaming kernel with runs of consecutive steps per CTA where they share K/V tiles
    // (the forward's rule); else one step per CTA, by the one-step kernel where it exists.
    const Sm90WindowTiling streaming = window_attention_bwd_dq_tiling<kHeadDim, true>();
    const int positions = streaming.cta_rows / s.hc;  // of one step: warpgroups x pw
    dq.stream = !kHasOneStepDq<kHeadDim> || steps_share_tiles(p.window_left, p.window_right, positions, streaming.stages);
    const Sm90WindowTiling t = dq.stream ? streaming : window_attention_bwd_dq_tiling<kHeadDim, false>();
    const int step_positions = t.cta_rows / s.hc;
    const StepChains chains{p.window_left, p.window_right, p.max_seqlen_q, p.batch,
                            p.total_q,     int64_t(p.h_k) * s.head_chunks, step_positions};
    dq.steps = steps_per_cta(chains, t.ctas_per_sm, t.stages);
    const int64_t steps = (int64_t(p.max_seqlen_q) + step_positions - 1) / step_positions;
    dq.blocks = int((steps + dq.steps - 1) / dq.steps);
    dtype_switch(p.dtype, "window_attention_backward (sm90)", [&](auto t) {
      sink_switch(p.sink_mode, [&](auto sink) {
        launch_window_attention_bwd<typename decltype(t)::type, kHeadDim, typename decltype(sink)::type>(
            p, dq, dkdv, batch_z, static_cast<cudaStream_t>(stream));
      });
    });
  });
}

}  // namespace sinkops::cuda::sm90
