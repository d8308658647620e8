// Varlen window attention with sinks on Hopper (sm_90a) for NARROW windows (MiMo's +-64 and every
// window whose consecutive blocks of rows share key tiles; window_attention_sm90_wide.cuh takes
// full / causal / wide windows, window_attention_sm90.cu decides): warpgroup MMA with the
// accumulators in registers, whole K/V tiles loaded by TMA (and Q and the output too where the
// Config's kQoTma says; cp.async / thread stores where a box would cross a segment's end) through
// swizzled shared memory, mbarrier-synchronised (docs/DESIGN.md §2.1 for the math; bench/NOTES.md "Window
// attention, sm90" for the numbers).
//
// Work split (why): at MiMo's +-64 windows the kernel is bound by instruction issue and the
// per-tile latency chain (S = Q K^T, softmax, O += P V of one warpgroup are serial), not by FLOPs
// or DRAM; a CTA must read each K/V tile once for every query head that needs it.
//  * One CTA per SM (v5) computes a run of consecutive steps of one (segment, head block). A step
//    is kConsumers warpgroups x 64 rows; the rows of one warpgroup are Pw consecutive query
//    positions x Hc query heads of ONE kv head (GQA folded into M, Hc x Pw = 64), head-major: row r
//    is head r / Pw, position r % Pw. Warpgroup w's positions follow warpgroup w - 1's, so all read
//    the same K/V tiles, loaded once. Each step's Q goes to one of two buffers, loaded while the
//    step before computes (the buffer then stages that step's output).
//  * Key tiles (64 keys) sit on a fixed grid from the segment's key 0 (tile g = keys 64 g ..), so
//    key 0, when visible at all, is column 0 of tile 0: the key0 sink is one branch on it; the null
//    sink is folded once per row at the end. Both come from the shared sink policy. The CTA loads
//    its tiles in order, once: consecutive steps of a narrow window keep the tiles they share
//    (steps_share_tiles; the launcher gives every other window one step per CTA).
//  * Per block and warpgroup: only the 16-key chunks its rows' windows touch (N = 16 n keys, a
//    compile-time variant each), S = Q K^T (SS wgmma, 64 x N), the mask only in chunks that cut
//    some row's window, an online softmax on raw logits (the scale, > 0, enters the exponent's
//    FFMA), O += P V (RS wgmma, P from registers). A block is the part of one tile the
//    warpgroup's rows see (a +-64 warpgroup: 144 of its 3 tiles' 192 keys). (v6's wider blocks
//    across tiles, one pass per window through a mirrored ring, lost to a third warpgroup at d 80
//    and a fourth at d 64: bench/NOTES.md, "Window v6" and "v7".)
//  * No producer warps: ptxas allocates every warp for the kernel's launch bound, whatever
//    setmaxnreg does later (a producer next to the consumers could not launch or spilled). So the
//    warpgroups load: each its own Q rows, thread 0 every whole K/V tile by TMA (a tile that crosses
//    its segment's end: all threads a share by cp.async), up to kStages tiles ahead of the oldest
//    one a thread still reads, through ready / empty mbarriers (kv_tile_maps.cuh).
//  * cu_seqlens values are clamped (window_bounds.cuh), rows outside the segment or past d / d_v
//    are zero-filled and never read from global memory, so no value of them leaves the tensors.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "../sink_policy.cuh"
#include "../kernel_launch.cuh"
#include "../window_attention_launch.cuh"
#include "../window_bounds.cuh"
#include "sinkops/window_attention_params.h"
#include "wgmma.cuh"
#include "window_attention_sm90_launch.cuh"
#include "window_attention_sm90_rows.cuh"

namespace sinkops::cuda::sm90 {

// kStream: one CTA per SM streams consecutive steps (see the top); else one step per CTA, 2 CTAs x
// 2 warpgroups per SM at d <= 80 (v4's schedule: for windows whose steps cannot share tiles).
template <typename T, int kHeadDim_, bool kStream_>
struct WindowConfig {
  static constexpr int kHeadDim = kHeadDim_;  // the padded head dim of q, k and v (d, d_v <= it)
  static constexpr bool kStream = kStream_;
  static constexpr int kRowsPerWg = 64;       // M of every wgmma
  // Keys per tile. SINKOPS_WA90_BLOCK_N overrides it at d <= 80 (tuning runs only).
#ifndef SINKOPS_WA90_BLOCK_N
#define SINKOPS_WA90_BLOCK_N 64
#endif
  static constexpr int kBlockN = kHeadDim <= 80 ? SINKOPS_WA90_BLOCK_N : 64;
  // Streaming: one CTA per SM computes several consecutive steps (blocks of P positions), so its
  // loads for the next step overlap this one and a narrow window's steps share their K/V tiles.
  // The kernel is bound by each warp's dependent instructions, so warps per scheduler win:
  // d 64: four warpgroups at 128 registers (16 B spilled; a K/V tile serves 256 rows), 9-17 %
  // faster than three at 168 registers with 144-key blocks (bench/NOTES.md, "Window v6"); d 80:
  // three at <= 168 (7 % faster than two with 144 / 192-key blocks, "Window v7"); d 96..128: two
  // at up to 255. One step per CTA (d <= 80): 2 CTAs per SM at 128 registers, so one CTA's loads
  // and softmax hide behind the other's MMAs. (SINKOPS_WA90_D64_WARPGROUPS / _D80_: tuning runs only.)
#ifndef SINKOPS_WA90_D64_WARPGROUPS
#define SINKOPS_WA90_D64_WARPGROUPS 4
#endif
#ifndef SINKOPS_WA90_D80_WARPGROUPS
#define SINKOPS_WA90_D80_WARPGROUPS 3
#endif
  static constexpr int kConsumers = kStream && kHeadDim <= 64   ? SINKOPS_WA90_D64_WARPGROUPS
                                    : kStream && kHeadDim <= 80 ? SINKOPS_WA90_D80_WARPGROUPS
                                                                : 2;
  static constexpr int kThreads = 128 * kConsumers;  // no producer: the consumers load (below)
  // Q and the output by TMA (window_attention_sm90_rows.cuh) where it was measured faster (H100,
  // bench/NOTES.md "Window v12"): d 128 (16x1024 +-64: 170 -> 160 µs) and the one-step kernel at d 64
  // (+-256: 219 -> 215). Not in the four-warpgroup d 64 stream (MiMo): at 128 registers its paths
  // spilled into the tile loop (15 local loads a warp-step, MiMo video 93.4 -> 96.5 µs), nor at d 80
  // (3 % slower, 32-byte swizzle atoms: five boxes a block) or d 96 (not measured).
  static constexpr bool kQoTma = kHeadDim % 64 == 0 && !(kStream && kConsumers == 4);
  static constexpr int kMinBlocksPerSm = !kStream && kHeadDim <= 80 ? 2 : 1;
  // K/V tiles in the ring. Streaming: enough that a +-64 window's step keeps its tiles for the
  // next one (steps_share_tiles: 6 tiles for 192 positions of one head, 4 for 32 positions x 4
  // heads); the SM's shared memory bounds the rest (d 128: 64 KB of Q buffers + 5 x 32 KB). One
  // step per CTA: a +-64 window's 3 tiles at once (2 CTAs x 64-100 KB).
  static constexpr int kStages = kStream ? (kHeadDim <= 96 ? 6 : 5) : (kHeadDim <= 80 ? 3 : 5);
  static constexpr int kQBuffers = kStream ? 2 : 1;  // the next step's Q loads beside this one's
  static constexpr int kCtaRows = 64 * kConsumers;
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  static_assert(kHeadDim % 16 == 0 && kHeadDim <= 128, "the sm90 window kernel covers head dims 16..128");

  using Rows = KMajorRows<T, kHeadDim>;  // K-major rows in the widest swizzle atom that divides d
  template <int kRows>
  using Tiles = typename Rows::template Tiles<kRows>;
  static constexpr int kAtomWidth = Rows::kAtomWidth;  // elements; a tile row r starts at r * kAtomWidth
  // The K and V buffers are kStages Tiles<64> each; ring row r = key r % 64 of stage r / 64.
  // Elements to ring row r (a multiple of 16: the swizzle phase is kept).
  static __device__ __forceinline__ int row_offset(int r) {
    return (r / kBlockN) * kBlockN * kHeadDim + (r % kBlockN) * kAtomWidth;
  }
  // The N keys from a ring row: K as [N keys, d] for the QK MMA, V^T as [d_v channels, N keys]
  // for the PV MMA.
  using View = Tiles<kBlockN>;
  template <int N>
  using KeyRows = decltype(composition(View{}, Layout<Shape<Int<N>, Int<kHeadDim>>, Stride<_1, Int<kBlockN>>>{}));
  template <int N>
  using ValueRows = decltype(composition(View{}, Layout<Shape<Int<kHeadDim>, Int<N>>, Stride<Int<kBlockN>, _1>>{}));
  template <int N>
  using MmaQK = decltype(make_tiled_mma(GMMA::ss_op_selector<T, T, float, Shape<_64, Int<N>, _16>>()));
  using MmaPV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<T, T, float, Shape<_64, Int<kHeadDim>, _16>, GMMA::Major::K, GMMA::Major::MN>()));

  struct Smem {
    // [step % buffers][consumer] [64 rows, d] Tiles<64>: a step's Q, then its staged O
    alignas(1024) T q[kQBuffers][kConsumers][kRowsPerWg * kHeadDim];
    alignas(1024) T k[kStages * kBlockN * kHeadDim];  // [stages][64 keys, d]   (View each)
    alignas(1024) T v[kStages * kBlockN * kHeadDim];  // [stages][64 keys, d_v] (View each)
    Barrier q_ready[kQBuffers][kConsumers];
    Barrier ready[kStages], empty[kStages];
  };
  static constexpr int kSmemBytes = sizeof(Smem);
};

// Calls f(Int<16 n>{}) for the runtime n in [1, kMax], testing the widest first.
template <int kMax, typename F>
__device__ __forceinline__ void dispatch_chunks(int n, F&& f) {
  if constexpr (kMax == 1) {
    f(Int<16>{});
  } else {
    if (n == kMax) f(Int<16 * kMax>{});
    else dispatch_chunks<kMax - 1>(n, f);
  }
}

// Sink: sink::Key0Sink or sink::NullSink (no sink = NullSink without a sinks tensor).
template <typename Tg, int kHeadDim, typename Sink, bool kStream>
__global__ void __launch_bounds__(WindowConfig<typename CuteElement<Tg>::type, kHeadDim, kStream>::kThreads,
                                  WindowConfig<typename CuteElement<Tg>::type, kHeadDim, kStream>::kMinBlocksPerSm)
    window_attention_sm90_kernel(const __grid_constant__ WindowAttentionParams p,
                                 const __grid_constant__ window_attention::LaunchShape shape,
                                 const __grid_constant__ KvTileMaps maps, const __grid_constant__ QOutMaps rows) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = typename CuteElement<Tg>::type;
  using C = WindowConfig<T, kHeadDim, kStream>;
  constexpr int kBlockN = C::kBlockN, kStages = C::kStages, kThreads = C::kThreads;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<typename C::Smem*>(smem_raw);

  // wg through a shuffle: ptxas then knows it is warp-uniform (the stage / buffer addresses and the
  // wgmma descriptors built from it stay in uniform registers).
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0), t = threadIdx.x % 128;
  // Rows of a warpgroup: Hc heads x Pw positions, head-major (Hc, Pw powers of two, Hc Pw = 64).
  const int P = shape.positions_per_cta;  // positions of one step (all warpgroups)
  const int pw = P / C::kConsumers;
  const int pw_shift = __ffs(pw) - 1;
  const int hk = blockIdx.y / shape.head_blocks_per_kv;
  const int h_base = hk * shape.group + (blockIdx.y % shape.head_blocks_per_kv) * shape.heads_per_cta;
  const float c = shape.scale_log2;  // > 0 (window_attention_sm90_takes): max(c s) = c max(s)
  const float threshold_raw = fminf(kRescaleThreshold / c, FLT_MAX);  // lazy rescaling (lazy_rescale.cuh), raw logits
  // This thread's two accumulator rows' sinks (log2 units) and, for key0, the bias in raw logit
  // units (the max and the masks run on raw logits).
  float sink_r[2], bias_raw[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    sink_r[h] = sink::load_log2(p.sinks, h_base + (acc_row(h, t) >> pw_shift));
    bias_raw[h] = sink_r[h] * (1.f / c);
  }
  // Consecutive steps keep their shared key tiles (else the launcher gave each CTA one step).
  const bool reuse = steps_share_tiles(p.window_left, p.window_right, P, kStages);
  static_assert(kBlockN == kTileKeys, "steps_share_tiles counts 64-key tiles");

  if (threadIdx.x == 0) {
    for (int b = 0; b < C::kQBuffers; ++b)
      for (int w = 0; w < C::kConsumers; ++w) sm.q_ready[b][w].init(128);  // warpgroup w's arrivals (+ a TMA's bytes)
    for (int st = 0; st < kStages; ++st) {
      sm.ready[st].init(kThreads);  // every thread's cp.async arrival (+ the bytes of a TMA tile)
      sm.empty[st].init(kThreads);  // every thread, once no step of its warpgroup reads the tile again
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  // This thread's share of every K/V tile copy, and the CTA's tiles as one stream of load indices
  // over its steps and segments (window_attention_sm90_rows.cuh).
  using Copy = KvTileCopy<T, kHeadDim, kBlockN, kThreads, typename C::View>;
  const Copy kv_copy(sm.k, p, threadIdx.x);
  const uint32_t k_smem = cast_smem_ptr_to_uint(sm.k), v_smem = cast_smem_ptr_to_uint(sm.v);
  TileStream<kStages> stream;
  int gstep = 0;  // steps this CTA has computed: their Q buffer (gstep % buffers) and its barrier phase

  for (int b = blockIdx.z; b < p.batch; b += gridDim.z) {
    int64_t q_start, k_start;
    int sq, sk;
    window_attention::segment_bounds(p.cu_seqlens_q, b, p.total_q, q_start, sq);
    window_attention::segment_bounds(p.cu_seqlens_k, b, p.total_k, k_start, sk);
    // This CTA's steps: positions pos_begin + P s, s < n_steps (all < sq); one without kStream.
    StepRun<WindowAttentionParams> run{p};
    if (!run.start(blockIdx.x, shape.steps_per_cta, P, sq, sk, kStream)) continue;  // CTA-uniform
    const int pos_begin = run.pos_begin, n_steps = run.n_steps;
    auto live_of = [&](int s) { return run.live(s); };
    auto bounds = [&](int pos, int& lo, int& hi) { run.bounds(pos, lo, hi); };
    auto step_tiles = [&](int s, int& ta, int& tb) { run.step_tiles(s, ta, tb); };

    // ---- Q: each warpgroup loads its own rows of a step into Q buffer `buf` ----
    auto q_buffer = [&](int buf) { return make_tensor(make_smem_ptr(sm.q[buf][wg]), typename C::template Tiles<64>{}); };
    auto load_q = [&](int s, int buf) {
      auto sQ = q_buffer(buf);
      load_q_rows<Tg, kHeadDim, C::kQoTma>(sQ, rows, sm.q_ready[buf][wg], p, q_start + pos_begin + s * P, h_base,
                                           wg * pw, pw, pw_shift, live_of(s), t, wg);
    };
    // ---- K/V: every thread copies a share of each tile ----
    // The CTA's tiles g_first..g_last are loaded in order: tile g is load index g + shift.
    int g_first, g_last;
    run.run_tiles(g_first, g_last);
    stream.start_segment(g_first);  // every tile of the previous segment was read and released
    auto copy = [&](int st, int g) {
      kv_copy.load(maps, sm.ready[st], k_smem + st * Copy::kTileBytes, v_smem + st * Copy::kTileBytes, p, k_start,
                   g * kBlockN, sk, hk);
    };
    auto produce = [&]() { stream.produce(sm.ready, sm.empty, g_last, copy); };
    auto release_below = [&](int g) { stream.release_below(sm.ready, sm.empty, g, g_last, copy); };

    load_q(0, gstep % C::kQBuffers);
    produce();

    using MmaPV = typename C::MmaPV;
    int ta, tb;  // this step's tiles
    step_tiles(0, ta, tb);
    for (int s = 0; s < n_steps; ++s, ++gstep) {
      const int buf = gstep % C::kQBuffers;
      // The next step's rows land while this one computes: whole rows by TMA after this step's first
      // tile (by then the TMA store of the output staged in that buffer, the step before, has read
      // it), others by the threads' copies now. (The copies' addresses outside the tile loop: ptxas
      // hoisted them out of it into every step otherwise, ~130 instructions.)
      const bool next = kStream && s + 1 < n_steps;
      const bool next_by_tma = next && whole_rows<C::kQoTma>(rows, wg * pw, pw, live_of(s + 1));
      if (next && !next_by_tma) {
        auto sQ = q_buffer(buf ^ 1);
        load_q_rows_by_threads<Tg, kHeadDim, C::kQoTma>(sQ, rows, sm.q_ready[buf ^ 1][wg], p,
                                                        q_start + pos_begin + (s + 1) * P, h_base, wg * pw, pw,
                                                        pw_shift, live_of(s + 1), t, wg);
      }
      auto load_next_q = [&]() {
        if (next_by_tma) {
          auto sQ = q_buffer(buf ^ 1);
          load_q_rows_by_tma<kHeadDim>(sQ, rows, sm.q_ready[buf ^ 1][wg], q_start + pos_begin + (s + 1) * P, h_base,
                                       wg * pw, t);
        }
      };
      const int pos0 = pos_begin + s * P, live = live_of(s);

      // ---- warpgroup wg: its 64 rows of the step ----
      // This thread's two accumulator rows (acc_row(0 / 1)): their window bounds.
      int lo_r[2], hi_r[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = acc_row(h, t);
        const int rel = wg * pw + (r & (pw - 1));
        if (rel < live) {
          bounds(pos0 + rel, lo_r[h], hi_r[h]);
        } else {
          lo_r[h] = 1, hi_r[h] = 0;  // no such row: sees nothing, stored nowhere
        }
      }
      // The warpgroup's first and last live positions bound the keys any of its rows sees.
      const int first = wg * pw, last = (wg + 1) * pw - 1 < live - 1 ? (wg + 1) * pw - 1 : live - 1;
      const bool wg_live = first < live;
      int lo_first = 1, hi_first = 0, lo_last = 1, hi_last = 0;
      if (wg_live) {
        bounds(pos0 + first, lo_first, hi_first);
        bounds(pos0 + last, lo_last, hi_last);
      }

      // The warpgroup's keys start at its first row's first key, down to a 16-key chunk (they end at
      // its last row's last key, hi_last, inside the step's tiles: step_tiles).
      const int k_first = lo_first & ~15;
      Tensor acc_o = partition_fragment_C(MmaPV{}, Shape<_64, Int<kHeadDim>>{});
      clear(acc_o);
      float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};  // raw logits / log2 units
      auto sQ = q_buffer(buf);

      // A block: N keys from key kc at ring row `ring_row`: S = Q K^T, the online softmax, O += P V.
      auto block_body = [&](auto n_keys, int ring_row, int kc) __attribute__((always_inline)) {
        constexpr int N = decltype(n_keys)::value;
        using MmaQK = typename C::template MmaQK<N>;
        Tensor acc_s = partition_fragment_C(MmaQK{}, Shape<_64, Int<N>>{});             // S, then P (fp32)
        Tensor p_reg = make_tensor<T>(partition_shape_A(MmaPV{}, Shape<_64, Int<N>>{}));  // P (16-bit)
        auto sK = make_tensor(make_smem_ptr(sm.k + C::row_offset(ring_row)), typename C::template KeyRows<N>{});
        wgmma_ss(MmaQK{}, sQ, sK, acc_s, true, t);
        warpgroup_commit_batch();
        warpgroup_wait<0>();
        // The window's mask only in the 16-key chunks that cut some row's (a +-64 warpgroup of 16
        // positions: 2 of its 9).
        const bool key0_tile = Sink::kKey0Bias && kc == 0;  // blocks start on 16-key chunks
        bias_and_mask(acc_s, kc, key0_tile, bias_raw, lo_r, hi_r, lo_last, hi_first, t);
        float mc[2], alpha[2];
        update_row_max<true>(acc_s, row_max, row_sum, c, threshold_raw, alpha, mc);
        // O is rescaled only when some row of the warp has a new max (warp-uniform branch), never
        // after the first block (O is zero: a narrow window's only block).
        if (kc != k_first && __any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
          for (int i = 0; i < size(acc_o); ++i) acc_o(i) *= alpha[(i / 2) % 2];
        }
        exponentials(acc_s, c, mc, key0_tile, t);
#pragma unroll
        for (int i = 0; i < size(acc_s); ++i) {
          row_sum[(i / 2) % 2] += acc_s(i);
          p_reg(i) = T(acc_s(i));
        }
        auto sV = make_tensor(make_smem_ptr(sm.v + C::row_offset(ring_row)), typename C::template ValueRows<N>{});
        wgmma_rs(MmaPV{}, p_reg, sV, acc_o, t);
        warpgroup_commit_batch();
        warpgroup_wait<0>();
      };

      sm.q_ready[buf][wg].wait((gstep / C::kQBuffers) & 1);
      // Every tile of the step, the warpgroup's columns of it (blocks that cross tiles without a
      // mirror ran 2-5 % slower: v6).
      for (int j = 0; j < tb - ta + 1; ++j) {
        produce();  // before the wait: never waits on a tile this thread still holds
        const int st = stream.wait(sm.ready, ta + j);
        const int kt = (ta + j) * kBlockN;  // key indices below are relative to kt
        // The tile intersects some row's window (warpgroup-uniform).
        const bool active = wg_live && kt <= hi_last && lo_first - kt <= kBlockN - 1;
        if (active) {
          // This warpgroup's columns of the tile: [c_lo, c_lo + 16 n) covers every key its rows see.
          const int c_lo = (lo_first - kt > 0 ? lo_first - kt : 0) & ~15;
          const int c_end = hi_last - kt + 1 < kBlockN ? hi_last - kt + 1 : kBlockN;
          dispatch_chunks<kBlockN / 16>((c_end - c_lo + 15) / 16, [&](auto n_keys) __attribute__((always_inline)) {
            block_body(n_keys, st * kBlockN + c_lo, kt + c_lo);
          });
        }
        if (!reuse) release_below(ta + j + 1);  // a wide window's step may hold more tiles than stages
        if (j == 0) load_next_q();
      }
      if (tb < ta) load_next_q();  // (a step that sees no key)
      // Release what no later step reads: the tiles before the next step's first (all of them
      // after the last step; several steps per CTA only with reuse).
      int ta_next = 0, tb_next = -1;
      if (s + 1 < n_steps) step_tiles(s + 1, ta_next, tb_next);
      release_below(tb_next >= ta_next ? ta_next : g_last + 1);
      ta = ta_next, tb = tb_next;

      // ---- epilogue: the sink policy's finish, staged 16-bit rows, whole-row stores ----
      // Every QK of this warpgroup is done (each ended in warpgroup_wait<0>), so its Q rows are free
      // (step s + 2's Q lands there after the last staged_bar).
      float out_scale[2];
      finish_rows<Sink>(p, row_max, row_sum, sink_r, c, h_base, q_start + pos0, wg * pw, pw, pw_shift, live, t,
                        out_scale);
      store_o_rows<Tg, MmaPV, kHeadDim, C::kQoTma>(acc_o, out_scale, sQ, rows, p, q_start + pos0, h_base, wg * pw,
                                                   pw, pw_shift, live, t, wg);
    }
  }
  cp_async_wait_all();
  if (C::kQoTma && t == 0) tma_store_wait<0>();  // the last staged outputs have been read
#endif
}

template <int kHeadDim, bool kStream>
Sm90WindowTiling window_attention_tiling() {
  using C = WindowConfig<cutlass::bfloat16_t, kHeadDim, kStream>;
  return {C::kSmemBytes, C::kCtaRows, C::kMinBlocksPerSm, C::kStages};
}

template <typename Tg, int kHeadDim, typename Sink, bool kStream>
void launch_window_attention(const WindowAttentionParams& p, const window_attention::LaunchShape& shape, dim3 grid,
                             cudaStream_t stream) {
  using C = WindowConfig<typename CuteElement<Tg>::type, kHeadDim, kStream>;
  constexpr auto kernel = window_attention_sm90_kernel<Tg, kHeadDim, Sink, kStream>;
  reserve_dynamic_smem<kernel>(C::kSmemBytes, "window_attention (sm90)");
  const int pw = shape.positions_per_cta / C::kConsumers;  // a warpgroup's rows: pw positions x heads_per_cta heads
  kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(
      p, shape, make_kv_tile_maps<kHeadDim, C::kBlockN>(p),
      C::kQoTma ? make_q_out_maps<kHeadDim>(p, pw, shape.heads_per_cta) : QOutMaps{});
  check_launch("window_attention (sm90)");
}

}  // namespace sinkops::cuda::sm90
