// The backward of varlen window attention with sinks on Hopper (sm_90a): a dq kernel and a dk/dv
// kernel, warpgroup MMA with the accumulators in registers, whole K/V tiles and Q/dO blocks loaded
// by TMA (kv_tile_maps.cuh; those that cross a segment's end copied with cp.async) into swizzled
// shared memory, double-buffered (docs/DESIGN.md §6 for the math; bench/NOTES.md
// "Window backward, sm90" for the numbers). No atomics: every gradient element has one writer, so
// the result is deterministic.
//
// Math, per query row i of a kv head's group and key j of its window, in log2 units:
// x = c s_ij (+ the key0 bias on the segment's key 0, c = scale log2 e), Q_ij = 2^(x - lse2_i),
// P = r_i Q, dX = Q (r_i dP - delta_i) with dP_ij = <dO_i, v_j>; dq_i = scale sum_j dX_ij k_j,
// dk_j = scale sum_i dX_ij q_i, dv_j = sum_i P_ij dO_i. The row terms D = <dO, O>, r = 1 - p_sink
// (the null sink; 1 otherwise, 0 where the row saw nothing), delta = r D - dlse and the rows' sink
// gradients come from the sink policy (sink_policy.cuh: backward_row), in the dq kernel, which
// stores r and delta for the dk/dv kernel (so the dq kernel runs first). Under key0 the element loops
// skip the multiply by r: r is 1 on every row whose Q is not 0 (v7.2, bench/NOTES.md: dk/dv -3.6 %).
//
// Rows of a block are the forward's: Pw consecutive positions x Hc heads of one kv head (GQA folded
// into M, Hc Pw = 64, head-major: row r = head r / Pw, position r % Pw; Hc = min(group, 64), a
// power of two). Every operand is a layout the forward uses:
//  * dq kernel, the forward's narrow-window structure: one CTA per SM over a run of consecutive
//    steps (warpgroups x Pw positions) of one (segment, kv head, head chunk), the 64-key tiles of
//    the steps' windows streamed once through a ring; each warpgroup's Q and dO rows resident for
//    its step. S = Q K^T, dP = dO V^T (SS), dq += dX K (RS, K viewed [d, 64 keys] as the forward
//    views V).
//  * dk/dv kernel, one CTA per (segment, 64-key tile, kv head): K and V stay resident; the query
//    blocks whose windows reach the tile (every head chunk) stream through two buffers (three at
//    d <= 64, where a block's dV / dK products run on into the next block).
//    S^T = K Q^T, dP^T = V dO^T (SS: the accumulators' columns are query rows, whose row terms are
//    read per column from shared memory), dV += P^T dO, dK += dX^T Q (RS, dO and Q viewed [d, 64 rows]).
//  * cu_seqlens values are clamped (window_bounds.cuh); rows outside the segment and channels
//    outside the tensors are zero-filled (cp.async, TMA's bounds) and never read, so no value of
//    them leaves the tensors.
//  * Every gradient element is written (the caller does not zero-fill): rows of a segment by their
//    blocks, rows in no segment with zeros by every CTA's threads, a share each (zero_rows_outside).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "../mma_sm80.cuh"  // ptx::exp2_approx
#include "../sink_policy.cuh"
#include "../window_bounds.cuh"
#include "sinkops/window_attention_backward_params.h"
#include "../kernel_launch.cuh"
#include "wgmma.cuh"
#include "window_attention_sm90_launch.cuh"  // WindowBwdShape, the launch declarations
#include "window_attention_sm90_rows.cuh"    // KMajorRows, load_rows, TileStream, KvTileCopy, staged_bar

namespace sinkops::cuda::sm90 {

// Tuning knobs (tools/prof/variant_so.sh builds variants with -D...): the dk/dv kernel's buffers of
// the streamed tiles at d <= 64 (3: a block's dV / dK run on into the next block, kDefer; wider
// head dims keep 2: a third would cost a CTA per SM at d 128) and its minimum CTAs per SM (its
// register cap); the dq kernel's ring (below).
#ifndef SINKOPS_WBWD_DKDV_STAGES
#define SINKOPS_WBWD_DKDV_STAGES 3
#endif
#ifndef SINKOPS_WBWD_DKDV_CTAS
#define SINKOPS_WBWD_DKDV_CTAS 1
#endif

template <typename T, int kHeadDim, int kStages_>
struct WindowBwdConfig {
  static constexpr int kThreads = 128;  // one warpgroup
  static constexpr int kStages = kStages_;  // buffers of the streamed tiles: kStages - 1 loads in flight
  static_assert(kStages_ >= 1, "a ring of at least one buffer (1: each tile loads before it computes)");
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  using Atom = conditional_t<kHeadDim % 64 == 0, GMMA::Layout_K_SW128_Atom<T>,
                             conditional_t<kHeadDim % 32 == 0, GMMA::Layout_K_SW64_Atom<T>, GMMA::Layout_K_SW32_Atom<T>>>;
  using Tile = decltype(tile_to_shape(Atom{}, Shape<_64, Int<kHeadDim>>{}, Step<_1, _2>{}));  // [64 rows, d]
  using TileT = decltype(composition(Tile{}, Layout<Shape<Int<kHeadDim>, _64>, Stride<_64, _1>>{}));  // [d, 64 rows]
  using MmaS = decltype(make_tiled_mma(GMMA::ss_op_selector<T, T, float, Shape<_64, _64, _16>>()));
  using MmaG = decltype(make_tiled_mma(
      GMMA::rs_op_selector<T, T, float, Shape<_64, Int<kHeadDim>, _16>, GMMA::Major::K, GMMA::Major::MN>()));
  struct Smem {
    alignas(1024) T resident[2][64 * kHeadDim];     // dq: Q, dO of the block; dk/dv: K, V of the tile
    alignas(1024) T streamed[kStages_][2][64 * kHeadDim];  // [buffer]: dq: K, V tiles; dk/dv: Q, dO blocks
    // [buffer] each row's terms, one 16-byte load: dq {lse2, r, delta} in buffer 0; dk/dv {lse, r, delta}
    float4 rows[kStages_][64];
    Barrier loaded[kStages_];  // dk/dv: [buffer] its Q and dO block by TMA (whole blocks inside the segment)
  };
  static constexpr int kSmemBytes = sizeof(Smem);
};
template <typename T, int kHeadDim>
using WindowBwdDkdvConfig = WindowBwdConfig<T, kHeadDim, kHeadDim <= 64 ? SINKOPS_WBWD_DKDV_STAGES : 2>;

// The next buffer of a ring of n.
__device__ __forceinline__ int next_buffer(int buf, int n) { return buf + 1 == n ? 0 : buf + 1; }

// ----------------------------------------------------------------------------- rows in no segment
// Rows [0, lo) and [hi, total) of the packed tokens, lo = clamp(cu[0]), hi = max(lo, clamp(cu[batch])):
// the rows in no segment when cu_seqlens is non-decreasing (otherwise some rows between segments
// stay unwritten or race with a segment's: unspecified, in bounds; docs/DESIGN.md §6).
struct RowsOutside {
  int64_t lo, hi, total;
  __device__ int64_t count() const { return lo + (total - hi); }
  __device__ int64_t row(int64_t i) const { return i < lo ? i : hi + (i - lo); }  // i < count()
};

__device__ __forceinline__ RowsOutside rows_outside(const int32_t* cu, int batch, int64_t total) {
  auto clamp = [&](int64_t x) { return x < 0 ? int64_t(0) : x > total ? total : x; };
  const int64_t lo = clamp(cu[0]), hi = clamp(cu[batch]);
  return RowsOutside{lo, hi > lo ? hi : lo, total};
}

// The dk/dv kernel's query blocks in order: head chunk-major, positions pos0 = m_lo + pw j, j < n_pos.
struct BlockCursor {
  int h0, pos0;  // the block's first head and position
  int j = 0;
  __device__ __forceinline__ void next(int m_lo, int pw, int n_pos, int hc) {
    if (++j == n_pos) {
      j = 0, pos0 = m_lo, h0 += hc;
    } else {
      pos0 += pw;
    }
  }
};

// This CTA's index in the grid, and the grid's CTA count.
__device__ __forceinline__ int64_t grid_cta() {
  return (int64_t(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
}
__device__ __forceinline__ int64_t grid_ctas() { return int64_t(gridDim.x) * gridDim.y * gridDim.z; }

// This CTA's share of zeroing rows `o` of a [total, heads, width] tensor (width % 8 == 0, rows
// 16-byte aligned): a row per CTA at a time, 16-byte stores. Nothing to do in the usual case
// (cu[0] = 0, cu[batch] = total).
template <typename Tg>
__device__ void zero_rows_outside(const RowsOutside& o, Tg* base, int64_t row_stride, int64_t head_stride, int heads,
                                  int width) {
  const int chunks = width / 8;
  for (int64_t i = grid_cta(); i < o.count(); i += grid_ctas()) {
    Tg* row = base + o.row(i) * row_stride;
    for (int j = threadIdx.x; j < heads * chunks; j += blockDim.x) {
      const int head = j / chunks;
      *reinterpret_cast<uint4*>(row + head * head_stride + (j - head * chunks) * 8) = make_uint4(0, 0, 0, 0);
    }
  }
}

// The same for the rows `o` of a [heads, total] float32 array (the sink's row gradients).
__device__ __forceinline__ void zero_rows_outside(const RowsOutside& o, float* base, int heads) {
  for (int64_t i = grid_cta(); i < o.count(); i += grid_ctas())
    for (int head = threadIdx.x; head < heads; head += blockDim.x) base[head * o.total + o.row(i)] = 0.f;
}

// One operand of a tile copy: row r of the tile is row (r & rel_mask) x head (r >> head_shift) of a
// [rows, heads, d] tensor from `base` (rows and heads relative to the tile's first), channels < d.
template <typename Tg>
struct TileSource {
  const Tg* base;
  int row_stride, head_stride;  // elements, < 2^23 (window_attention_backward_unsupported): offsets fit int32
  int d;
};

// Copies 64 rows into two [64, d] tiles with cp.async (every thread of the warpgroup a share): row r
// is (rel = r & rel_mask, head r >> head_shift); rows with rel >= live and channels past each
// source's d are zero-filled and read nothing (from `dummy`, a valid address).
template <typename C, typename Tile, typename Tg>
__device__ __forceinline__ void copy_tile_pair(Tile& sA, Tile& sB, int t, const TileSource<Tg>& a,
                                               const TileSource<Tg>& b, int rel_mask, int head_shift, int live,
                                               const Tg* dummy) {
#pragma unroll
  for (int n = 0; n < C::kChunks / 2; ++n) {  // 64 rows x kChunks chunks over 128 threads
    const int idx = t + 128 * n;
    const int r = idx / C::kChunks, col = (idx % C::kChunks) * 8;
    const int rel = r & rel_mask, head = r >> head_shift;
    const bool a_ok = rel < live && col < a.d, b_ok = rel < live && col < b.d;
    cp_async_16_zfill_l2(&sA(r, col), a_ok ? a.base + (rel * a.row_stride + head * a.head_stride + col) : dummy, a_ok);
    cp_async_16_zfill_l2(&sB(r, col), b_ok ? b.base + (rel * b.row_stride + head * b.head_stride + col) : dummy, b_ok);
  }
}

// <a, b> over 8 16-bit elements in float32.
template <typename Tg>
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b) {
  const auto* a2 = reinterpret_cast<const std::conditional_t<std::is_same_v<Tg, __half>, __half2, __nv_bfloat162>*>(&a);
  const auto* b2 = reinterpret_cast<const std::conditional_t<std::is_same_v<Tg, __half>, __half2, __nv_bfloat162>*>(&b);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 x, y;
    if constexpr (std::is_same_v<Tg, __half>) {
      x = __half22float2(a2[i]), y = __half22float2(b2[i]);
    } else {
      x = __bfloat1622float2(a2[i]), y = __bfloat1622float2(b2[i]);
    }
    s = fmaf(x.x, y.x, s);
    s = fmaf(x.y, y.y, s);
  }
  return s;
}

// Stores the two consecutive columns (col, col + 1) of an accumulator row when the row exists (ok)
// and col < d (d % 8 == 0: a pair never straddles d). `row` is formed once per accumulator row:
// a 64-bit address per pair was ~25 instructions, 480 of the dq kernel's ~2900 per warp.
template <typename Tg>
__device__ __forceinline__ void store_pair(Tg* row, int col, bool ok, int d, float a, float b) {
  using Tg2 = std::conditional_t<std::is_same_v<Tg, __half>, __half2, __nv_bfloat162>;
  Tg2 pair;  // converted whether stored or not: the store alone is predicated, no branch
  if constexpr (std::is_same_v<Tg, __half>) {
    pair = __floats2half2_rn(a, b);
  } else {
    pair = __floats2bfloat162_rn(a, b);
  }
  if (ok && col < d) *reinterpret_cast<Tg2*>(row + col) = pair;
}

// ---------------------------------------------------------------------------------------- dq
// The forward's narrow-window structure (window_attention_sm90.cuh; v6 of this kernel, bench/NOTES.md
// "Window backward v6"): one CTA per SM computes a run of consecutive steps of one (segment, kv
// head x head chunk); a step is kConsumers warpgroups x 64 rows, warpgroup w's Pw positions
// following w - 1's, so all read the same 64-key K/V tiles. The tiles stream once through a ring
// (TileStream, KvTileCopy: window_attention_sm90_rows.cuh), and consecutive steps keep the tiles
// they share when the window allows (steps_share_tiles; else one step per CTA). Per warpgroup and
// step: the row terms (D = <dO, O> from global memory), then for every tile its rows see:
// S = Q K^T, dP = dO V^T (SS), dq += dX K (RS, K viewed [d, 64 keys] as the forward views V). The
// next step's Q / dO land in the warpgroup's buffers while it stores this step's dq. (v5, one
// warpgroup and one block per CTA, spent 54 % of its instructions once per CTA: copies' address
// math, row terms, bounds, epilogue; its K / V tiles were read once per 16 positions.)
// Tuning knobs at d 64 (tools/prof/variant_so.sh -D...): the dq kernel's warpgroups and ring stages.
#ifndef SINKOPS_WBWD_DQ_WG64
#define SINKOPS_WBWD_DQ_WG64 3
#endif
#ifndef SINKOPS_WBWD_DQ_STAGES64
#define SINKOPS_WBWD_DQ_STAGES64 6
#endif
// kStream: the streaming kernel (several warpgroups, one CTA per SM, runs of steps); else one step
// of one warpgroup per CTA, 3 CTAs per SM (v5's schedule: for windows whose steps cannot share key
// tiles at d 64, where it measured 6 % faster on full attention; kHasOneStepDq).
template <typename T, int kHeadDim, bool kStream>
struct WindowBwdDqConfig {
  // Warpgroups: 3 at <= 168 registers up to d 80; 2 from d 96 (the shared memory below; at d 128
  // the dq accumulator alone is 64 registers).
  static constexpr int kConsumers = !kStream ? 1 : kHeadDim <= 64 ? SINKOPS_WBWD_DQ_WG64 : kHeadDim <= 80 ? 3 : 2;
  static constexpr int kThreads = 128 * kConsumers;
  static constexpr int kMinBlocksPerSm = kStream ? 1 : 3;
  // K/V tiles in the ring: a +-64 step (48 positions of one head at MiMo's 32/8; 32 with two
  // warpgroups) spans 4 tiles; d 64 loads further ahead; d 128 fits 2 beside its 4 row tiles per
  // warpgroup (its steps then never share tiles: one step per CTA); one step per CTA: 2.
  static constexpr int kStages = !kStream ? 2 : kHeadDim <= 64 ? SINKOPS_WBWD_DQ_STAGES64 : kHeadDim <= 96 ? 4 : 2;
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  using Tile = typename KMajorRows<T, kHeadDim>::template Tiles<64>;                                 // [64 rows, d]
  using TileT = decltype(composition(Tile{}, Layout<Shape<Int<kHeadDim>, _64>, Stride<_64, _1>>{}));  // [d, 64 rows]
  using MmaS = decltype(make_tiled_mma(GMMA::ss_op_selector<T, T, float, Shape<_64, _64, _16>>()));
  using MmaG = decltype(make_tiled_mma(
      GMMA::rs_op_selector<T, T, float, Shape<_64, Int<kHeadDim>, _16>, GMMA::Major::K, GMMA::Major::MN>()));
  struct Smem {
    alignas(1024) T q[kConsumers][64 * kHeadDim];     // [warpgroup] its rows' Q  (Tile), this step
    alignas(1024) T dout[kConsumers][64 * kHeadDim];  // [warpgroup] its rows' dO (Tile), this step
    alignas(1024) T d_out[kConsumers][64 * kHeadDim];  // [warpgroup] O (Tile) for the next row terms
    alignas(1024) T d_dout[kConsumers][64 * kHeadDim]; // [warpgroup] dO (Tile) for the next row terms
    alignas(1024) T k[kStages * 64 * kHeadDim];       // [stage] 64 keys (Tile)
    alignas(1024) T v[kStages * 64 * kHeadDim];       // [stage] 64 keys (Tile)
    float4 rows[kConsumers][64];                      // [warpgroup][row] {lse2, r, delta}
    float2 d_lse[kConsumers][64];                     // [warpgroup][row] {lse, dlse} for the next row terms
    Barrier q_ready[kConsumers];                      // warpgroup w's Q / dO copies (cp.async arrivals)
    Barrier d_ready[kConsumers];                      // its row-term inputs
    Barrier ready[kStages], empty[kStages];
  };
  static constexpr int kSmemBytes = sizeof(Smem);
  static_assert(kSmemBytes <= 227 * 1024, "the dq kernel's shared memory");
};

template <typename Tg, int kHeadDim, typename Sink, bool kStream>
__global__ void __launch_bounds__(WindowBwdDqConfig<typename CuteElement<Tg>::type, kHeadDim, kStream>::kThreads,
                                  WindowBwdDqConfig<typename CuteElement<Tg>::type, kHeadDim, kStream>::kMinBlocksPerSm)
    window_attention_bwd_dq_sm90_kernel(const __grid_constant__ WindowAttentionBackwardParams p,
                                        const __grid_constant__ WindowBwdShape shape,
                                        const __grid_constant__ KvTileMaps maps) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = typename CuteElement<Tg>::type;
  using C = WindowBwdDqConfig<T, kHeadDim, kStream>;
  using Tile = typename C::Tile;
  constexpr int kStages = C::kStages, kThreads = C::kThreads;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<typename C::Smem*>(smem_raw);
  // wg through a shuffle: ptxas then knows it is warp-uniform (as in the forward)
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0), t = threadIdx.x % 128;
  const int pw = shape.pw, pw_shift = __ffs(pw) - 1;
  const int P = pw * C::kConsumers;  // positions of a step
  const int hk = blockIdx.y / shape.head_chunks;
  const int h0 = hk * shape.group + (blockIdx.y % shape.head_chunks) * shape.hc;  // the rows' first head
  const float c = shape.scale_log2;
  const bool reuse = steps_share_tiles(p.window_left, p.window_right, P, kStages);

  if (threadIdx.x == 0) {
    for (int w = 0; w < C::kConsumers; ++w) {
      sm.q_ready[w].init(128);
      sm.d_ready[w].init(128);
    }
    for (int st = 0; st < kStages; ++st) {
      sm.ready[st].init(kThreads);  // every thread's cp.async arrival (+ the bytes of a TMA tile)
      sm.empty[st].init(kThreads);  // every thread, once no step of its warpgroup reads the tile again
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();
  if (const RowsOutside o = rows_outside(p.cu_seqlens_q, p.batch, p.total_q); o.count() > 0) {  // CTA-uniform
    zero_rows_outside(o, static_cast<Tg*>(p.dq), p.dq_row_stride, p.dq_head_stride, p.h_q, p.d);
    if (p.dsink_rows != nullptr) zero_rows_outside(o, p.dsink_rows, p.h_q);
  }

  using Copy = KvTileCopy<Tg, kHeadDim, 64, kThreads, Tile>;
  const Copy kv_copy(sm.k, p, threadIdx.x);
  const uint32_t k_smem = cast_smem_ptr_to_uint(sm.k), v_smem = cast_smem_ptr_to_uint(sm.v);
  TileStream<kStages> stream;
  int gstep = 0;  // steps this CTA has computed: the phase of its q_ready / d_ready barriers
  auto sQ = make_tensor(make_smem_ptr(sm.q[wg]), Tile{});
  auto sO = make_tensor(make_smem_ptr(sm.dout[wg]), Tile{});
  auto sDo = make_tensor(make_smem_ptr(sm.d_out[wg]), Tile{});   // O for the row terms
  auto sDdo = make_tensor(make_smem_ptr(sm.d_dout[wg]), Tile{}); // dO for the row terms

  for (int b = blockIdx.z; b < p.batch; b += gridDim.z) {
    int64_t q_start, k_start;
    int sq, sk;
    window_attention::segment_pair(p, b, q_start, sq, k_start, sk);
    // This CTA's steps: positions pos_begin + P s, s < n_steps (all < sq).
    StepRun<WindowAttentionBackwardParams> run{p};
    if (!run.start(blockIdx.x, shape.steps, P, sq, sk)) continue;  // CTA-uniform
    const int pos_begin = run.pos_begin, n_steps = run.n_steps;
    auto live_of = [&](int s) { return run.live(s); };
    auto bounds = [&](int pos, int& lo, int& hi) { run.bounds(pos, lo, hi); };
    // Warpgroup wg's Q and dO rows of step s into its buffers.
    auto load_step = [&](int s) {
      const int64_t row0 = q_start + pos_begin + s * P;
      load_rows<Tg, C::kChunks>(sQ, p.q, p.q_row_stride, p.q_head_stride, p.d, row0, h0, wg * pw, pw, pw_shift,
                                live_of(s), t);
      load_rows<Tg, C::kChunks>(sO, p.dout, p.dout_row_stride, p.dout_head_stride, p.d_v, row0, h0, wg * pw, pw,
                                pw_shift, live_of(s), t);
      cp_async_arrive(sm.q_ready[wg]);
    };
    // Its row terms' inputs of step s (O, dO, lse, dlse; rows past the segment zero-filled): loaded
    // a step ahead, so the row terms never wait on global memory (v5 stalled there a third of its time).
    auto load_row_terms = [&](int s) {
      const int64_t row0 = q_start + pos_begin + s * P;
      const int live = live_of(s);
      load_rows<Tg, C::kChunks>(sDo, p.out, p.out_row_stride, p.out_head_stride, p.d_v, row0, h0, wg * pw, pw,
                                pw_shift, live, t);
      load_rows<Tg, C::kChunks>(sDdo, p.dout, p.dout_row_stride, p.dout_head_stride, p.d_v, row0, h0, wg * pw, pw,
                                pw_shift, live, t);
      if (t < 64) {
        const int rel = wg * pw + (t & (pw - 1));
        const int64_t head = h0 + (t >> pw_shift), row = row0 + rel;
        const bool ok = rel < live, g_ok = ok && p.dlse != nullptr;
        cp_async_ca_zfill<4>(&sm.d_lse[wg][t].x, ok ? p.lse + head * p.lse_head_stride + row : p.lse, ok);
        cp_async_ca_zfill<4>(&sm.d_lse[wg][t].y, g_ok ? p.dlse + head * p.dlse_head_stride + row : p.lse, g_ok);
      }
      cp_async_arrive(sm.d_ready[wg]);
    };
    // The CTA's tiles g_first..g_last, loaded in order.
    int g_first, g_last;
    run.run_tiles(g_first, g_last);
    stream.start_segment(g_first);
    auto copy = [&](int st, int g) {
      kv_copy.load(maps, sm.ready[st], k_smem + st * Copy::kTileBytes, v_smem + st * Copy::kTileBytes, p, k_start,
                   g * 64, sk, hk);
    };
    auto produce = [&]() { stream.produce(sm.ready, sm.empty, g_last, copy); };
    auto release_below = [&](int g) { stream.release_below(sm.ready, sm.empty, g, g_last, copy); };

    load_row_terms(0);
    load_step(0);
    produce();
    int ta, tb;  // this step's tiles
    run.step_tiles(0, ta, tb);
    for (int s = 0; s < n_steps; ++s, ++gstep) {
      const int pos0 = pos_begin + s * P, live = live_of(s);
      auto row_rel = [&](int r) { return wg * pw + (r & (pw - 1)); };  // position of row r in the step
      auto row_head = [&](int r) { return h0 + (r >> pw_shift); };
      // ---- the row terms: two threads per row (a pair of lanes), D = <dO, O> in float32 ----
      sm.d_ready[wg].wait(gstep & 1);
      {
        const int r = t >> 1, half = t & 1;
        const bool ok = row_rel(r) < live;
        const int64_t row = q_start + pos0 + row_rel(r), head = row_head(r);
        float dsum = 0.f;  // (zero-filled past d_v and past the segment)
#pragma unroll
        for (int ch = half; ch < C::kChunks; ch += 2)
          dsum += dot8<Tg>(*reinterpret_cast<const uint4*>(&sDo(r, 8 * ch)), *reinterpret_cast<const uint4*>(&sDdo(r, 8 * ch)));
        dsum += __shfl_xor_sync(0xffffffffu, dsum, 1);
        if (half == 0) {
          float lse2 = INFINITY, rr = 0.f, delta = 0.f;
          if (ok) {
            const float2 l = sm.d_lse[wg][r];  // {lse, dlse}
            const float sink_s = p.sinks != nullptr ? p.sinks[head] : -INFINITY;
            const sink::BackwardRow br = Sink::backward_row(l.x, dsum, l.y, sink_s);
            const int64_t at = head * p.total_q + row;
            p.row_r[at] = br.r;
            p.row_delta[at] = br.delta;
            if (!Sink::kKey0Bias && p.sinks != nullptr) p.dsink_rows[at] = br.dsink;
            lse2 = l.x * sink::kLog2e, rr = br.r, delta = br.delta;
          }
          sm.rows[wg][r] = make_float4(lse2, rr, delta, 0.f);
        }
      }
      staged_bar(wg);  // the warpgroup's row terms in shared memory; its row-term inputs are free
      if (s + 1 < n_steps) load_row_terms(s + 1);
      // This thread's two accumulator rows: their terms, windows and (key0) sink bias.
      float lse2[2], rr[2], dl[2], bias[2] = {0.f, 0.f}, dsink_row[2] = {0.f, 0.f};
      int lo[2], hi[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = acc_row(h, t);
        const float4 terms = sm.rows[wg][r];
        lse2[h] = terms.x, rr[h] = terms.y, dl[h] = terms.z;
        if (row_rel(r) < live) {
          bounds(pos0 + row_rel(r), lo[h], hi[h]);
        } else {
          lo[h] = 1, hi[h] = 0;  // no such row: sees nothing
        }
        if (hi[h] < lo[h]) lo[h] = 0x7fffffff, hi[h] = 0x7fffffff;  // empty: no kn < sk passes the test below
        if constexpr (Sink::kKey0Bias) {
          // a +inf sink: its rows output v_0 and have lse +inf, so Q and dX are 0 (bias unused)
          const float sv = p.sinks != nullptr ? p.sinks[row_head(r)] : 0.f;
          bias[h] = sv == INFINITY ? 0.f : sv * sink::kLog2e;
        }
      }
      // The warpgroup's first and last live positions bound the keys any of its rows sees.
      const int first = wg * pw, last = (wg + 1) * pw - 1 < live - 1 ? (wg + 1) * pw - 1 : live - 1;
      const bool wg_live = first < live;
      int lo_first = 1, hi_last = 0;
      if (wg_live) {
        int unused;
        bounds(pos0 + first, lo_first, unused);
        bounds(pos0 + last, unused, hi_last);
      }
      Tensor acc_dq = partition_fragment_C(typename C::MmaG{}, Shape<_64, Int<kHeadDim>>{});
      clear(acc_dq);
      sm.q_ready[wg].wait(gstep & 1);
      for (int j = 0; j < tb - ta + 1; ++j) {
        produce();  // before the wait: never waits on a tile this thread still holds
        const int st = stream.wait(sm.ready, ta + j);
        const int g = ta + j, kt = 64 * g;
        if (wg_live && kt <= hi_last && lo_first - kt <= 63) {  // the tile meets some row's window (warpgroup-uniform)
          auto sK = make_tensor(make_smem_ptr(sm.k + st * 64 * kHeadDim), Tile{});
          auto sV = make_tensor(make_smem_ptr(sm.v + st * 64 * kHeadDim), Tile{});
          auto sKt = make_tensor(make_smem_ptr(sm.k + st * 64 * kHeadDim), typename C::TileT{});
          Tensor acc_s = partition_fragment_C(typename C::MmaS{}, Shape<_64, _64>{});   // S
          Tensor acc_dp = partition_fragment_C(typename C::MmaS{}, Shape<_64, _64>{});  // dP
          // S and dP in two groups: the exponentials of S run while dP is in the tensor cores
          wgmma_ss(typename C::MmaS{}, sQ, sK, acc_s, true, t);
          warpgroup_commit_batch();
          wgmma_ss(typename C::MmaS{}, sO, sV, acc_dp, true, t);
          warpgroup_commit_batch();
          warpgroup_wait<1>();
          warpgroup_fence_operand(acc_s);
          Tensor dx_reg = make_tensor<T>(partition_shape_A(typename C::MmaG{}, Shape<_64, _64>{}));
          // key kt + acc_col(i) is visible to row h iff (unsigned)(kt + col - lo) <= hi - lo
          const int base[2] = {kt - lo[0], kt - lo[1]}, width[2] = {hi[0] - lo[0], hi[1] - lo[1]};
          const bool key0 = Sink::kKey0Bias && g == 0 && t % 4 == 0;  // holds key 0 (column 0) of both its rows
#pragma unroll
          for (int i = 0; i < size(acc_s); ++i) {
            const int h = (i / 2) % 2;
            float x = acc_s(i) * c;
            if (Sink::kKey0Bias && (i == 0 || i == 2) && key0) x += bias[h];  // elements 0 and 2: column 0
            const bool visible = unsigned(base[h] + acc_col(i, t)) <= unsigned(width[h]);
            acc_s(i) = visible ? ptx::exp2_approx(x - lse2[h]) : 0.f;  // Q; 0 where lse = +inf
          }
          warpgroup_wait<0>();
          warpgroup_fence_operand(acc_dp);
#pragma unroll
          for (int i = 0; i < size(acc_s); ++i) {
            const int h = (i / 2) % 2;
            dx_reg(i) = T(acc_s(i) * ((Sink::kKey0Bias ? acc_dp(i) : rr[h] * acc_dp(i)) - dl[h]));
          }
          if (key0) {  // the key0 sink's row gradient: dX of key 0 (elements 0 and 2)
            dsink_row[0] += acc_s(0) * (acc_dp(0) - dl[0]);  // (key0: r is 1 wherever Q is not 0)
            dsink_row[1] += acc_s(2) * (acc_dp(2) - dl[1]);
          }
          wgmma_rs(typename C::MmaG{}, dx_reg, sKt, acc_dq, t);
          warpgroup_commit_batch();
          warpgroup_wait<0>();
        }
        if (!reuse) release_below(g + 1);  // a wide window's step may hold more tiles than stages
      }
      // Release what no later step reads: the tiles before the next step's first.
      int ta_next = 0, tb_next = -1;
      if (s + 1 < n_steps) run.step_tiles(s + 1, ta_next, tb_next);
      release_below(tb_next >= ta_next ? ta_next : g_last + 1);
      ta = ta_next, tb = tb_next;
      warpgroup_fence_operand(acc_dq);  // read only after the last wgmma's wait
      // Every wgmma of the warpgroup that read its Q / dO is done: the next step's land there.
      staged_bar(wg);
      if (s + 1 < n_steps) load_step(s + 1);

      // ---- dq (times the scale), the key0 sink's row gradients ----
      Tg* dq_row[2];  // this thread's two accumulator rows
      bool dq_ok[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = acc_row(h, t);
        dq_ok[h] = row_rel(r) < live;
        dq_row[h] = static_cast<Tg*>(p.dq) + (q_start + pos0 + row_rel(r)) * p.dq_row_stride +
                    row_head(r) * p.dq_head_stride;
      }
#pragma unroll
      for (int i = 0; i < size(acc_dq); i += 2) {
        const int h = (i / 2) % 2;
        store_pair(dq_row[h], acc_col(i, t), dq_ok[h], p.d, acc_dq(i) * p.scale, acc_dq(i + 1) * p.scale);
      }
      if constexpr (Sink::kKey0Bias) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = acc_row(h, t);
          // the thread holding column 0 (key 0) of the row; 0 where the row does not see key 0
          if (p.sinks != nullptr && t % 4 == 0 && row_rel(r) < live)
            p.dsink_rows[int64_t(row_head(r)) * p.total_q + q_start + pos0 + row_rel(r)] =
                lo[h] == 0 && hi[h] >= 0 ? dsink_row[h] : 0.f;
        }
      }
    }
  }
  cp_async_wait_all();
#endif
}

// -------------------------------------------------------------------------------------- dk/dv
// One CTA per (64-key tile, kv head, segment; segments past grid z looped): K, V resident, the
// query blocks (every head chunk x the positions whose windows reach the tile) streamed.
template <typename Tg, int kHeadDim, typename Sink>
__global__ void __launch_bounds__(128, SINKOPS_WBWD_DKDV_CTAS)
    window_attention_bwd_dkdv_sm90_kernel(const __grid_constant__ WindowAttentionBackwardParams p,
                                          const __grid_constant__ WindowBwdShape shape,
                                          const __grid_constant__ RowBlockMaps maps) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = typename CuteElement<Tg>::type;
  using C = WindowBwdDkdvConfig<T, kHeadDim>;
  constexpr int S = C::kStages;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<typename C::Smem*>(smem_raw);
  const int t = threadIdx.x;
  const int hk = blockIdx.y;
  const int hc = shape.hc, pw = shape.pw, pw_shift = __ffs(pw) - 1;
  const float c = shape.scale_log2;
  const Tg* q = static_cast<const Tg*>(p.q);
  const Tg* k = static_cast<const Tg*>(p.k);
  const Tg* v = static_cast<const Tg*>(p.v);
  const Tg* dout = static_cast<const Tg*>(p.dout);
  auto sK = make_tensor(make_smem_ptr(sm.resident[0]), typename C::Tile{});
  auto sV = make_tensor(make_smem_ptr(sm.resident[1]), typename C::Tile{});
  if (const RowsOutside o = rows_outside(p.cu_seqlens_k, p.batch, p.total_k); o.count() > 0) {  // CTA-uniform
    zero_rows_outside(o, static_cast<Tg*>(p.dk), p.dk_row_stride, p.dk_head_stride, p.h_k, p.d);
    zero_rows_outside(o, static_cast<Tg*>(p.dv), p.dv_row_stride, p.dv_head_stride, p.h_k, p.d_v);
  }
  if (t == 0) {
    for (int i = 0; i < S; ++i) sm.loaded[i].init(1);  // thread 0's arrival with the block's bytes
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();
  uint32_t loaded_phase = 0;  // bit i: the phase of buffer i's next TMA block

  for (int b = blockIdx.z; b < p.batch; b += gridDim.z) {
    int64_t q_start, k_start;
    int sq, sk;
    window_attention::segment_pair(p, b, q_start, sq, k_start, sk);
    const int64_t kt64 = int64_t(blockIdx.x) * 64;
    if (kt64 >= sk) continue;  // CTA-uniform
    const int kt = int(kt64);
    const int64_t off = int64_t(sk) - sq;
    // Query positions whose window reaches keys [kt, kt + 63]: pos + off - left <= kt + 63 and
    // pos + off + right >= kt, in 64-bit (left, right and off span the int32 range).
    const int64_t m_lo64 = p.window_right >= 0 ? kt - off - p.window_right : 0;
    const int64_t m_hi64 = p.window_left >= 0 ? kt + 63 - off + p.window_left + 1 : sq;
    const int m_lo = int(m_lo64 < 0 ? 0 : m_lo64 > sq ? sq : m_lo64) / pw * pw;
    const int m_hi = int(m_hi64 < 0 ? 0 : m_hi64 > sq ? sq : m_hi64);
    const int n_pos_blocks = m_hi > m_lo ? (m_hi - m_lo) / pw + ((m_hi - m_lo) % pw != 0) : 0;  // no int overflow
    const int n_blocks = n_pos_blocks * shape.head_chunks;
    // This thread's two accumulator rows are keys: the positions that see each, [pmin, pmax].
    int pmin[2], pmax[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int kn = kt + acc_row(h, t);
      const int64_t lo = p.window_right >= 0 ? kn - off - p.window_right : 0;
      const int64_t hi = p.window_left >= 0 ? kn - off + p.window_left : sq - 1;
      pmin[h] = int(lo < 0 ? 0 : lo > sq ? sq : lo);
      pmax[h] = int(hi > sq - 1 ? sq - 1 : hi < -1 ? -1 : hi);
      // no such key, or no position sees it: pos - 0x7fffffff < 0 for every pos < sq fails the test below
      if (kn >= sk || pmax[h] < pmin[h]) pmin[h] = 0x7fffffff, pmax[h] = 0x7fffffff;
    }
    // Block blk: head chunk blk / n_pos_blocks, positions m_lo + pw (blk % n_pos_blocks) ... (BlockCursor)
    // Blocks are loaded, then computed, in order: a cursor each (a division per block cost ~25 instructions).
    BlockCursor loading{hk * shape.group, m_lo}, computing{hk * shape.group, m_lo};
    // A block that lies inside the segment comes by TMA when the host made the maps: its rows past
    // the end would be another segment's or padding, which the MMAs must not see (0 x NaN).
    auto whole_block = [&](int pos0) { return maps.ok && sq - pos0 >= pw; };
    auto load_block = [&](int buf) {
      const int h0 = loading.h0, pos0 = loading.pos0;
      loading.next(m_lo, pw, n_pos_blocks, hc);
      auto sQ = make_tensor(make_smem_ptr(sm.streamed[buf][0]), typename C::Tile{});
      auto sO = make_tensor(make_smem_ptr(sm.streamed[buf][1]), typename C::Tile{});
      const int64_t row0 = q_start + pos0;
      if (whole_block(pos0)) {  // by TMA (kv_tile_maps.cuh); else zero-filled past the segment's end
        if (t == 0)
          tma_row_block_pair<kHeadDim>(maps, sm.loaded[buf], cast_smem_ptr_to_uint(sm.streamed[buf][0]),
                                       cast_smem_ptr_to_uint(sm.streamed[buf][1]), int(row0), h0);
      } else {
        copy_tile_pair<C>(sQ, sO, t,
                          TileSource<Tg>{q + row0 * p.q_row_stride + int64_t(h0) * p.q_head_stride,
                                         int(p.q_row_stride), int(p.q_head_stride), p.d},
                          TileSource<Tg>{dout + row0 * p.dout_row_stride + int64_t(h0) * p.dout_head_stride,
                                         int(p.dout_row_stride), int(p.dout_head_stride), p.d_v},
                          pw - 1, pw_shift, sq - pos0, q);
      }
      if (t < 64) {
        // The row terms {lse, r, delta} land with the block's tiles (plain loads here would stall the
        // warp a memory round trip every block). Rows past the segment are zero-filled: they are
        // never visible (pos <= pmax < sq), so Q = 0 there whatever their lse.
        const int64_t head = h0 + (t >> pw_shift), row = row0 + (t & (pw - 1));
        const bool row_ok = pos0 + (t & (pw - 1)) < sq;
        cp_async_ca_zfill<4>(&sm.rows[buf][t].x, row_ok ? p.lse + head * p.lse_head_stride + row : p.lse, row_ok);
        cp_async_ca_zfill<4>(&sm.rows[buf][t].y, row_ok ? p.row_r + head * p.total_q + row : p.row_r, row_ok);
        cp_async_ca_zfill<4>(&sm.rows[buf][t].z, row_ok ? p.row_delta + head * p.total_q + row : p.row_delta, row_ok);
      }
    };

    Tensor acc_dk = partition_fragment_C(typename C::MmaG{}, Shape<_64, Int<kHeadDim>>{});
    Tensor acc_dv = partition_fragment_C(typename C::MmaG{}, Shape<_64, Int<kHeadDim>>{});
    clear(acc_dk);
    clear(acc_dv);
    if (n_blocks > 0) {
      copy_tile_pair<C>(sK, sV, t,  // the key tile: keys past the segment zero-filled
                        TileSource<Tg>{k + (k_start + kt) * p.k_row_stride + int64_t(hk) * p.k_head_stride,
                                       int(p.k_row_stride), 0, p.d},
                        TileSource<Tg>{v + (k_start + kt) * p.v_row_stride + int64_t(hk) * p.v_head_stride,
                                       int(p.v_row_stride), 0, p.d_v},
                        63, 6, sk - kt, k);
    }
    // kDefer (3 or more buffers): a block's dV and dK products run on into the next block's S^T and
    // dP^T (the wait for them is the one for S^T), so a block's loads go two buffers behind and run
    // S - 2 blocks ahead; with two buffers each block waits for its dK before the loads run S - 1 ahead.
    constexpr bool kDefer = S >= 3;
    constexpr int kAhead = kDefer ? S - 2 : S - 1;
    // The first kAhead blocks (the key tile's copies ride in the first one's group); one cp.async
    // group per block, empty past the last, so group counts stay uniform.
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      if (i < n_blocks) load_block(i);
      cp_async_commit();
    }
    for (int blk = 0, buf = 0; blk < n_blocks; ++blk, buf = next_buffer(buf, S)) {
      if constexpr (!kDefer) {
        // block blk + S - 1 into the buffer of block blk - 1, which every thread left at the last barrier
        if (blk + kAhead < n_blocks) load_block(buf == 0 ? S - 1 : buf - 1);
        cp_async_commit();
      }
      cp_async_wait_group<kDefer ? kAhead - 1 : kAhead>();
      __syncthreads();  // every thread's copies of this block (and of the key tile) have landed
      if constexpr (kDefer) {
        // block blk + S - 2 into the buffer of block blk - 2, whose products every thread waited for
        // (with block blk - 1's S^T) before the barrier
        if (blk + kAhead < n_blocks) load_block(buf + kAhead < S ? buf + kAhead : buf + kAhead - S);
        cp_async_commit();
      }
      if (whole_block(computing.pos0)) {  // CTA-uniform
        sm.loaded[buf].wait((loaded_phase >> buf) & 1);
        loaded_phase ^= 1u << buf;
      }
      auto sQ = make_tensor(make_smem_ptr(sm.streamed[buf][0]), typename C::Tile{});
      auto sO = make_tensor(make_smem_ptr(sm.streamed[buf][1]), typename C::Tile{});
      auto sQt = make_tensor(make_smem_ptr(sm.streamed[buf][0]), typename C::TileT{});
      auto sOt = make_tensor(make_smem_ptr(sm.streamed[buf][1]), typename C::TileT{});
      Tensor acc_s = partition_fragment_C(typename C::MmaS{}, Shape<_64, _64>{});   // S^T
      Tensor acc_dp = partition_fragment_C(typename C::MmaS{}, Shape<_64, _64>{});  // dP^T
      // Four groups in flight order: S^T, dP^T; then dV (issued once P is known, while dX is
      // computed) and dK. The exponentials run while dP^T is in the tensor cores. (kDefer: the
      // previous block's dV and dK are still in flight here; the wait for S^T completes them.)
      wgmma_ss(typename C::MmaS{}, sK, sQ, acc_s, true, t);
      warpgroup_commit_batch();
      wgmma_ss(typename C::MmaS{}, sV, sO, acc_dp, true, t);
      warpgroup_commit_batch();
      const int h0 = computing.h0, pos0 = computing.pos0;
      computing.next(m_lo, pw, n_pos_blocks, hc);
      // the key0 sink of this block's heads: threads 0..3 hold key 0 (row 0 of tile 0)
      const bool key0_here = Sink::kKey0Bias && kt == 0 && t < 4 && p.sinks != nullptr;
      // position pos0 + (col & (pw - 1)) sees key h iff (unsigned)(pos - pmin) <= pmax - pmin
      const int base[2] = {pos0 - pmin[0], pos0 - pmin[1]}, width[2] = {pmax[0] - pmin[0], pmax[1] - pmin[1]};
      Tensor p_reg = make_tensor<T>(partition_shape_A(typename C::MmaG{}, Shape<_64, _64>{}));   // P^T
      Tensor dx_reg = make_tensor<T>(partition_shape_A(typename C::MmaG{}, Shape<_64, _64>{}));  // dX^T
      warpgroup_wait<1>();
      warpgroup_fence_operand(acc_s);
#pragma unroll
      for (int i = 0; i < size(acc_s); ++i) acc_s(i) *= c;  // log2 units
      uint32_t one_hot = 0;  // elements of key 0 whose row has a +inf key0 sink and sees key 0
      if (key0_here) {  // rare (4 threads of the segment's first tile): the bias on key 0, elements with h == 0
#pragma unroll
        for (int i = 0; i < size(acc_s); ++i) {
          if ((i / 2) % 2 != 0) continue;
          const int col = acc_col(i, t);
          const float s = p.sinks[h0 + (col >> pw_shift)];
          const bool visible = unsigned(base[0] + (col & (pw - 1))) <= unsigned(width[0]);
          if (s == INFINITY && visible) one_hot |= 1u << i;  // its rows output v_0: P one-hot, Q and dX 0
          acc_s(i) = s == INFINITY ? -INFINITY : acc_s(i) + s * sink::kLog2e;
        }
      }
#pragma unroll
      for (int i = 0; i < size(acc_s); ++i) {
        const int h = (i / 2) % 2, col = acc_col(i, t);  // accumulator row = key, column = query row
        const bool visible = unsigned(base[h] + (col & (pw - 1))) <= unsigned(width[h]);
        const float4 terms = sm.rows[buf][col];  // {lse, r, delta}
        const float prob = visible ? ptx::exp2_approx(fmaf(-sink::kLog2e, terms.x, acc_s(i))) : 0.f;  // Q; 0 where lse = +inf
        p_reg(i) = T(Sink::kKey0Bias ? prob : prob * terms.y);  // key0: r is 1 wherever Q is not 0
        acc_s(i) = prob;
      }
      if (one_hot) {
#pragma unroll
        for (int i = 0; i < size(acc_s); ++i)
          if (one_hot >> i & 1) p_reg(i) = T(1.f);
      }
      wgmma_rs(typename C::MmaG{}, p_reg, sOt, acc_dv, t);
      warpgroup_commit_batch();
      warpgroup_wait<1>();  // dP^T (dV may still run)
      warpgroup_fence_operand(acc_dp);
#pragma unroll
      for (int i = 0; i < size(acc_s); ++i) {
        const float4 terms = sm.rows[buf][acc_col(i, t)];
        dx_reg(i) = T(acc_s(i) * ((Sink::kKey0Bias ? acc_dp(i) : terms.y * acc_dp(i)) - terms.z));
      }
      wgmma_rs(typename C::MmaG{}, dx_reg, sQt, acc_dk, t);
      warpgroup_commit_batch();
      if constexpr (!kDefer) {
        warpgroup_wait<0>();
        __syncthreads();  // buffer buf is read by every thread before block blk + S lands in it
      }
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_dk);  // read only after the last wgmma's wait
    warpgroup_fence_operand(acc_dv);
    // ---- dK (times the scale), dV: keys of the segment, channels below d / d_v ----
    Tg *dk_row[2], *dv_row[2];  // this thread's two accumulator rows (keys)
    bool key_ok[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int key = acc_row(h, t);
      key_ok[h] = key < sk - kt;
      const int64_t row = k_start + kt + key;
      dk_row[h] = static_cast<Tg*>(p.dk) + row * p.dk_row_stride + hk * p.dk_head_stride;
      dv_row[h] = static_cast<Tg*>(p.dv) + row * p.dv_row_stride + hk * p.dv_head_stride;
    }
#pragma unroll
    for (int i = 0; i < size(acc_dk); i += 2) {
      const int h = (i / 2) % 2, col = acc_col(i, t);
      store_pair(dk_row[h], col, key_ok[h], p.d, acc_dk(i) * p.scale, acc_dk(i + 1) * p.scale);
      store_pair(dv_row[h], col, key_ok[h], p.d_v, acc_dv(i), acc_dv(i + 1));
    }
    __syncthreads();  // the next segment's copies reuse every buffer
  }
#endif
}

template <int kHeadDim>
int window_attention_bwd_smem_bytes() {
  int bytes = WindowBwdDkdvConfig<cutlass::bfloat16_t, kHeadDim>::kSmemBytes;
  for (int dq : {WindowBwdDqConfig<cutlass::bfloat16_t, kHeadDim, true>::kSmemBytes,
                 WindowBwdDqConfig<cutlass::bfloat16_t, kHeadDim, false>::kSmemBytes})
    bytes = dq > bytes ? dq : bytes;
  return bytes;
}

template <int kHeadDim, bool kStream>
Sm90WindowTiling window_attention_bwd_dq_tiling() {
  using C = WindowBwdDqConfig<cutlass::bfloat16_t, kHeadDim, kStream>;
  return {C::kSmemBytes, 64 * C::kConsumers, C::kMinBlocksPerSm, C::kStages};
}

template <typename Tg, int kHeadDim, typename Sink>
void launch_window_attention_bwd(const WindowAttentionBackwardParams& p, const WindowBwdShape& dq_shape,
                                 const WindowBwdShape& dkdv_shape, int batch_z, cudaStream_t stream) {
  using T = typename CuteElement<Tg>::type;
  auto launch_dq = [&](auto stream_kernel) {
    constexpr bool kStream = decltype(stream_kernel)::value;
    using C = WindowBwdDqConfig<T, kHeadDim, kStream>;
    constexpr auto dq_kernel = window_attention_bwd_dq_sm90_kernel<Tg, kHeadDim, Sink, kStream>;
    reserve_dynamic_smem<dq_kernel>(C::kSmemBytes, "window_attention_backward (sm90 dq)", true);
    dq_kernel<<<dim3(dq_shape.blocks, p.h_k * dq_shape.head_chunks, batch_z), C::kThreads, C::kSmemBytes, stream>>>(
        p, dq_shape, make_kv_tile_maps<kHeadDim, 64>(p));
    check_launch("window_attention_backward (sm90 dq)");
  };
  // the dq kernel writes the row terms the dk/dv kernel reads: same stream, in this order
  if constexpr (kHasOneStepDq<kHeadDim>) {
    if (dq_shape.stream) launch_dq(std::true_type{});
    else launch_dq(std::false_type{});
  } else {
    launch_dq(std::true_type{});
  }
  constexpr int kDkdvSmem = WindowBwdDkdvConfig<T, kHeadDim>::kSmemBytes;
  constexpr auto dkdv_kernel = window_attention_bwd_dkdv_sm90_kernel<Tg, kHeadDim, Sink>;
  reserve_dynamic_smem<dkdv_kernel>(kDkdvSmem, "window_attention_backward (sm90 dk/dv)", true);
  dkdv_kernel<<<dim3(dkdv_shape.blocks, p.h_k, batch_z), 128, kDkdvSmem, stream>>>(
      p, dkdv_shape, make_row_block_maps<kHeadDim>(p, dkdv_shape.pw, dkdv_shape.hc));
  check_launch("window_attention_backward (sm90 dk/dv)");
}

}  // namespace sinkops::cuda::sm90
