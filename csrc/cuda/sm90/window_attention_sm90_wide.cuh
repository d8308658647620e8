// Varlen window attention with sinks on Hopper (sm_90a) for WIDE windows: full attention, causal,
// and every window whose consecutive blocks of rows cannot share their key tiles (docs/DESIGN.md
// §2.1 for the math; bench/NOTES.md "Window v8" for the numbers). The narrow MiMo windows keep
// window_attention_sm90.cuh, which is built for the opposite regime (few keys a row, bound by
// per-tile bookkeeping, so many small warpgroups that stream steps).
//
// Why a second kernel: with many keys a row the work is the two MMAs and the exponentials, and the
// narrow kernel runs them serially per warpgroup on 64-key tiles (S = Q K^T, wait, softmax, O += P V,
// wait): 340 TFLOP/s at d 128. Here, as in FlashAttention-3:
//  * 128-key tiles (wgmma m64n128: half the per-tile fixed costs, and the wide N the tensor cores
//    need); every warpgroup computes whole tiles, masked only where a tile cuts some row's window.
//  * A software pipeline inside each warpgroup: tile j's S = Q K^T and tile j-1's O += P V are
//    issued together, the softmax of tile j runs while O += P V still executes, and O is rescaled
//    once that MMA is done. Nothing stays in flight across the loop's back edge (ptxas serializes
//    the wgmmas of a loop otherwise, C7514).
//  * One CTA per SM, one block of 128 rows (2 warpgroups x 64, GQA folded into M exactly as the
//    narrow kernel folds it: row r of a warpgroup is head r / Pw, position r % Pw), 256 threads
//    at up to 255 registers (S 64, P 32, O 64 per thread at d 128; 244 used). No producer warps:
//    thread 0 loads each whole K/V tile by TMA (a tile that crosses its segment's end: every
//    thread a share by cp.async, zero-filled past the end), kStages - 1 tiles ahead, through
//    ready / empty mbarriers (TileStream and KvTileCopy, shared with the narrow kernel); at d 64
//    (kQoTma) each warpgroup's Q and output move by TMA too where all its rows lie in the segment.
//  * Key tiles sit on a fixed grid from the segment's key 0 (tile g = keys 128 g ..), so the key0
//    sink is one add on tile 0; the null sink is folded once per row at the end. Both come from
//    the shared sink policy.
//  * cu_seqlens values are clamped (window_bounds.cuh), rows outside the segment or past d / d_v are
//    zero-filled and never read from global memory, so no value of them leaves the tensors.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "../kernel_launch.cuh"
#include "../sink_policy.cuh"
#include "../window_attention_launch.cuh"
#include "../window_bounds.cuh"
#include "sinkops/window_attention_params.h"
#include "wgmma.cuh"
#include "window_attention_sm90_launch.cuh"
#include "window_attention_sm90_rows.cuh"

namespace sinkops::cuda::sm90 {

template <typename T, int kHeadDim_>
struct WideWindowConfig {
  static constexpr int kHeadDim = kHeadDim_;  // the padded head dim of q, k and v (d, d_v <= it)
#ifndef SINKOPS_WA90W_D64_WARPGROUPS
#define SINKOPS_WA90W_D64_WARPGROUPS 3
#endif
  // warpgroups of 64 rows: at d <= 64 three (FA3's 192-row tile; 165-168 registers, no spills:
  // full attention 16x1024 d 64 428 -> 394 us, bench/NOTES.md "Window v10"; the
  // SINKOPS_WA90W_D64_WARPGROUPS macro: tuning runs only), else two
  static constexpr int kConsumers = kHeadDim <= 64 ? SINKOPS_WA90W_D64_WARPGROUPS : 2;
  static constexpr int kThreads = 128 * kConsumers;
  // Lazy rescaling (lazy_rescale.cuh) with two warpgroups (d > 64): causal 1x4096 d 128 -3 %; with
  // three (d <= 64) it cost 1.5 % on full and 7 % on causal 16x1024 (its SASS grew by 112
  // instructions at 165-168 registers), so they keep the eager rule (bench/NOTES.md "Prefill v1.3").
  static constexpr bool kLazyRescale = kConsumers == 2;
  // Q and the output by TMA (window_attention_sm90_rows.cuh) at d 64: full attention 16x1024
  // 394 -> 383 µs, causal level; at d 128 full 1x4096 485 -> 495, causal 287 -> 291 (H100, bench/
  // NOTES.md "Window v12").
  static constexpr bool kQoTma = kHeadDim == 64;
  static constexpr int kCtaRows = 64 * kConsumers;
  // Keys per tile (SINKOPS_WA90W_BLOCK_N: tuning runs only).
#ifndef SINKOPS_WA90W_BLOCK_N
#define SINKOPS_WA90W_BLOCK_N 128
#endif
  static constexpr int kBlockN = SINKOPS_WA90W_BLOCK_N;
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  using Rows = KMajorRows<T, kHeadDim>;
  using QTile = typename Rows::template Tiles<64>;
  using View = typename Rows::template Tiles<kBlockN>;  // [kBlockN keys, d]: K for the QK MMA
  using Copy = KvTileCopy<T, kHeadDim, kBlockN, kThreads, View>;  // a thread's share of a K/V tile
  // V^T as [d_v channels, kBlockN keys] for the PV MMA.
  using ValueView = decltype(composition(View{}, Layout<Shape<Int<kHeadDim>, Int<kBlockN>>, Stride<Int<kBlockN>, _1>>{}));
  using MmaQK = decltype(make_tiled_mma(GMMA::ss_op_selector<T, T, float, Shape<_64, Int<kBlockN>, _16>>()));
  using MmaPV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<T, T, float, Shape<_64, Int<kHeadDim>, _16>, GMMA::Major::K, GMMA::Major::MN>()));
  // As many K/V stages as the SM's 227 KB hold beside the Q tiles (d 128: 32 KB of Q + 3 x 64 KB).
  static constexpr int kStageBytes = 2 * kBlockN * kHeadDim * int(sizeof(T));  // a K tile and a V tile
  static constexpr int kQBytes = kConsumers * 64 * kHeadDim * int(sizeof(T));
  static constexpr int kStagesFit = (227 * 1024 - kQBytes - 256) / kStageBytes;
  static constexpr int kStages = kStagesFit < 4 ? kStagesFit : 4;
  static_assert(kStages >= 2, "the pipeline holds one tile and loads the next");
  static_assert(kHeadDim % 16 == 0 && kHeadDim <= 128, "head dims 16..128");

  struct Smem {
    alignas(1024) T q[kConsumers][64 * kHeadDim];     // [consumer] [64 rows, d] QTile: Q, then the staged O
    alignas(1024) T k[kStages * kBlockN * kHeadDim];  // [stages][kBlockN keys, d]   View each
    alignas(1024) T v[kStages * kBlockN * kHeadDim];  // [stages][kBlockN keys, d_v] View each
    Barrier q_ready[kConsumers];
    Barrier ready[kStages], empty[kStages];
  };
  static constexpr int kSmemBytes = sizeof(Smem);
};

// Sink: sink::Key0Sink or sink::NullSink (no sink = NullSink without a sinks tensor).
template <typename Tg, int kHeadDim, typename Sink>
__global__ void __launch_bounds__(WideWindowConfig<typename CuteElement<Tg>::type, kHeadDim>::kThreads, 1)
    window_attention_sm90_wide_kernel(const __grid_constant__ WindowAttentionParams p,
                                      const __grid_constant__ window_attention::LaunchShape shape,
                                      const __grid_constant__ KvTileMaps maps,
                                      const __grid_constant__ QOutMaps rows) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = typename CuteElement<Tg>::type;
  using C = WideWindowConfig<T, kHeadDim>;
  using MmaQK = typename C::MmaQK;
  using MmaPV = typename C::MmaPV;
  constexpr int N = C::kBlockN, kStages = C::kStages, kThreads = C::kThreads;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<typename C::Smem*>(smem_raw);

  // wg through a shuffle: ptxas then knows it is warp-uniform (uniform registers for the addresses).
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0), t = threadIdx.x % 128;
  const int P = shape.positions_per_cta;  // positions of the CTA's block (both warpgroups)
  const int pw = P / C::kConsumers;
  const int pw_shift = __ffs(pw) - 1;
  const int hk = blockIdx.y / shape.head_blocks_per_kv;
  const int h_base = hk * shape.group + (blockIdx.y % shape.head_blocks_per_kv) * shape.heads_per_cta;
  const float c = shape.scale_log2;  // > 0 (window_attention_sm90_takes): max(c s) = c max(s)
  const float threshold_raw = fminf(kRescaleThreshold / c, FLT_MAX);  // lazy rescaling (lazy_rescale.cuh), raw logits
  float sink_r[2], bias_raw[2];      // this thread's two rows: sink (log2 units), key0 bias (raw logits)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    sink_r[h] = sink::load_log2(p.sinks, h_base + (acc_row(h, t) >> pw_shift));
    bias_raw[h] = sink_r[h] * (1.f / c);
  }

  if (threadIdx.x == 0) {
    for (int w = 0; w < C::kConsumers; ++w) sm.q_ready[w].init(128);  // warpgroup w's arrivals (+ a TMA's bytes)
    for (int st = 0; st < kStages; ++st) {
      sm.ready[st].init(kThreads);  // every thread's cp.async arrival (+ the bytes of a TMA tile)
      sm.empty[st].init(kThreads);  // every thread, once its warpgroup no longer reads the tile
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  // This thread's share of every K/V tile copy, and the CTA's tiles as one stream over its segments.
  const typename C::Copy kv_copy(sm.k, p, threadIdx.x);
  const uint32_t k_smem = cast_smem_ptr_to_uint(sm.k), v_smem = cast_smem_ptr_to_uint(sm.v);
  TileStream<kStages> stream;
  int gblock = 0;  // blocks this CTA has computed: the phase of its Q barrier

  for (int b = blockIdx.z; b < p.batch; b += gridDim.z) {
    int64_t q_start, k_start;
    int sq, sk;
    window_attention::segment_pair(p, b, q_start, sq, k_start, sk);
    const int64_t pos0_64 = int64_t(blockIdx.x) * P;
    if (pos0_64 >= sq) continue;  // CTA-uniform: nothing loaded, no phase used
    const int pos0 = int(pos0_64);
    const int live = sq - pos0 < P ? sq - pos0 : P;
    const int off = sk - sq;  // pos + off of a row (pos < sq) lies in (-2^31, sk): no overflow
    auto bounds = [&](int pos, int& lo, int& hi) {
      window_attention::row_bounds_diag(pos + off, p.window_left, p.window_right, sk, lo, hi);
    };
    // The CTA's tiles g_first..g_last: its first row's first key to its last row's last key (both
    // window bounds grow with the position).
    int g_first, g_last;
    {
      int kmin, kmax, unused;
      bounds(pos0, kmin, unused);
      bounds(pos0 + live - 1, unused, kmax);
      g_first = kmin / N;
      g_last = kmax >= kmin ? kmax / N : g_first - 1;
    }
    stream.start_segment(g_first);
    auto copy = [&](int st, int g) {
      kv_copy.load(maps, sm.ready[st], k_smem + st * C::Copy::kTileBytes, v_smem + st * C::Copy::kTileBytes, p, k_start,
                   g * N, sk, hk);
    };
    auto produce = [&]() { stream.produce(sm.ready, sm.empty, g_last, copy); };
    auto release_below = [&](int g) { stream.release_below(sm.ready, sm.empty, g, g_last, copy); };
    auto wait_tile = [&](int g) {
      produce();  // before the wait: never waits on a tile this thread still holds
      return stream.wait(sm.ready, g);
    };

    auto sQ = make_tensor(make_smem_ptr(sm.q[wg]), typename C::QTile{});
    load_q_rows<Tg, kHeadDim, C::kQoTma>(sQ, rows, sm.q_ready[wg], p, q_start + pos0, h_base, wg * pw, pw, pw_shift,
                                         live, t, wg);
    produce();

    // This thread's two accumulator rows: their window bounds; the warpgroup's first and last live
    // rows bound the keys any of its rows sees.
    int lo_r[2], hi_r[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int rel = wg * pw + (acc_row(h, t) & (pw - 1));
      if (rel < live) {
        bounds(pos0 + rel, lo_r[h], hi_r[h]);
      } else {
        lo_r[h] = 1, hi_r[h] = 0;  // no such row: sees nothing, stored nowhere
      }
    }
    const int first = wg * pw, last = (wg + 1) * pw - 1 < live - 1 ? (wg + 1) * pw - 1 : live - 1;
    int lo_first = 1, hi_first = 0, lo_last = 1, hi_last = 0;
    if (first < live) {
      bounds(pos0 + first, lo_first, hi_first);
      bounds(pos0 + last, lo_last, hi_last);
    }
    // The warpgroup's tiles j0..j1 (none when no row of it sees a key).
    const int j0 = lo_first / N, j1 = hi_last >= lo_first ? hi_last / N : j0 - 1;

    Tensor acc_o = partition_fragment_C(MmaPV{}, Shape<_64, Int<kHeadDim>>{});
    Tensor acc_s = partition_fragment_C(MmaQK{}, Shape<_64, Int<N>>{});             // S, then P (fp32)
    Tensor p_reg = make_tensor<T>(partition_shape_A(MmaPV{}, Shape<_64, Int<N>>{}));  // P (16-bit)
    clear(acc_o);
    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};  // raw logits / log2 units

    // The softmax of tile j's S (keys kt..kt + N - 1) into exponentials in acc_s; alpha: the
    // rescale of everything before it.
    auto softmax = [&](int kt, float (&alpha)[2]) __attribute__((always_inline)) {
      const bool key0_tile = Sink::kKey0Bias && kt == 0;
      bias_and_mask(acc_s, kt, key0_tile, bias_raw, lo_r, hi_r, lo_last, hi_first, t);
      float mc[2];
      update_row_max<C::kLazyRescale>(acc_s, row_max, row_sum, c, threshold_raw, alpha, mc);
      exponentials(acc_s, c, mc, key0_tile, t);
#pragma unroll
      for (int i = 0; i < size(acc_s); ++i) row_sum[(i / 2) % 2] += acc_s(i);
    };
    auto to_p = [&]() __attribute__((always_inline)) {
#pragma unroll
      for (int i = 0; i < size(acc_s); ++i) p_reg(i) = T(acc_s(i));
    };
    auto key_tile = [&](int st) { return make_tensor(make_smem_ptr(sm.k + st * N * kHeadDim), typename C::View{}); };
    auto value_tile = [&](int st) {
      return make_tensor(make_smem_ptr(sm.v + st * N * kHeadDim), typename C::ValueView{});
    };

    release_below(j0);  // tiles before this warpgroup's first
    sm.q_ready[wg].wait(gblock & 1);  // (also before the epilogue stages O over Q)
    if (j1 >= j0) {
      // Prologue: tile j0's S and softmax.
      int st_prev = wait_tile(j0);
      wgmma_ss(MmaQK{}, sQ, key_tile(st_prev), acc_s, true, t);
      warpgroup_commit_batch();
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc_s);
      {
        float alpha[2];
        softmax(j0 * N, alpha);
      }
      to_p();
      // Tile j: S_j = Q K_j^T and O += P_{j-1} V_{j-1} in flight together; the softmax of S_j
      // overlaps the second; O is rescaled once it is done.
      for (int j = j0 + 1; j <= j1; ++j) {
        const int st = wait_tile(j);
        wgmma_ss(MmaQK{}, sQ, key_tile(st), acc_s, true, t);
        warpgroup_commit_batch();
        wgmma_rs(MmaPV{}, p_reg, value_tile(st_prev), acc_o, t);
        warpgroup_commit_batch();
        warpgroup_wait<1>();
        warpgroup_fence_operand(acc_s);
        float alpha[2];
        softmax(j * N, alpha);
        warpgroup_wait<0>();
        warpgroup_fence_operand(acc_o);
        warpgroup_fence_operand(p_reg);
        release_below(j);  // tile j - 1: its K and V are read
        // O is rescaled only when some row of the warp has a new max (warp-uniform branch).
        if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
          for (int i = 0; i < size(acc_o); ++i) acc_o(i) *= alpha[(i / 2) % 2];
        }
        to_p();
        st_prev = st;
      }
      wgmma_rs(MmaPV{}, p_reg, value_tile(st_prev), acc_o, t);
      warpgroup_commit_batch();
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc_o);
    }
    release_below(g_last + 1);  // every tile of the block

    // ---- epilogue: the sink policy's finish, staged 16-bit rows, whole-row stores ----
    // Every QK of this warpgroup is done, so its Q rows are free for the staged output.
    float out_scale[2];
    finish_rows<Sink>(p, row_max, row_sum, sink_r, c, h_base, q_start + pos0, wg * pw, pw, pw_shift, live, t,
                      out_scale);
    store_o_rows<Tg, MmaPV, kHeadDim, C::kQoTma>(acc_o, out_scale, sQ, rows, p, q_start + pos0, h_base, wg * pw, pw,
                                                 pw_shift, live, t, wg);
    ++gblock;
  }
  cp_async_wait_all();
  if (C::kQoTma && t == 0) tma_store_wait<0>();  // the last staged output has been read
#endif
}

template <int kHeadDim>
Sm90WindowTiling window_attention_wide_tiling() {
  using C = WideWindowConfig<cutlass::bfloat16_t, kHeadDim>;
  return {C::kSmemBytes, C::kCtaRows, 1, C::kStages};
}

template <typename Tg, int kHeadDim, typename Sink>
void launch_window_attention_wide(const WindowAttentionParams& p, const window_attention::LaunchShape& shape,
                                  dim3 grid, cudaStream_t stream) {
  using C = WideWindowConfig<typename CuteElement<Tg>::type, kHeadDim>;
  constexpr auto kernel = window_attention_sm90_wide_kernel<Tg, kHeadDim, Sink>;
  reserve_dynamic_smem<kernel>(C::kSmemBytes, "window_attention (sm90, wide windows)");
  const int pw = shape.positions_per_cta / C::kConsumers;  // a warpgroup's rows: pw positions x heads_per_cta heads
  kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(
      p, shape, make_kv_tile_maps<kHeadDim, C::kBlockN>(p),
      C::kQoTma ? make_q_out_maps<kHeadDim>(p, pw, shape.heads_per_cta) : QOutMaps{});
  check_launch("window_attention (sm90, wide windows)");
}

}  // namespace sinkops::cuda::sm90
