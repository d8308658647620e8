// The backward of varlen window attention with sinks on Hopper (sm_90a): a dq kernel and a dk/dv
// kernel, warpgroup MMA with the accumulators in registers, tiles copied with cp.async into
// swizzled shared memory, double-buffered (docs/DESIGN.md §6 for the math; bench/NOTES.md
// "Window backward, sm90" for the numbers). No atomics: every gradient element has one writer, so
// the result is deterministic.
//
// Math, per query row i of a kv head's group and key j of its window, in log2 units:
// x = c s_ij (+ the key0 bias on the segment's key 0, c = scale log2 e), Q_ij = 2^(x - lse2_i),
// P = r_i Q, dX = Q (r_i dP - delta_i) with dP_ij = <dO_i, v_j>; dq_i = scale sum_j dX_ij k_j,
// dk_j = scale sum_i dX_ij q_i, dv_j = sum_i P_ij dO_i. The row terms D = <dO, O>, r = 1 - p_sink
// (the null sink; 1 otherwise, 0 where the row saw nothing), delta = r D - dlse and the rows' sink
// gradients come from the sink policy (sink_policy.cuh: backward_row), in the dq kernel, which
// stores r and delta for the dk/dv kernel (so the dq kernel runs first).
//
// Rows of a block are the forward's: Pw consecutive positions x Hc heads of one kv head (GQA folded
// into M, Hc Pw = 64, head-major: row r = head r / Pw, position r % Pw; Hc = min(group, 64), a
// power of two). Every operand is a layout the forward uses:
//  * dq kernel, one CTA (one warpgroup) per (segment, block of Pw positions, kv head, head chunk):
//    Q and dO stay resident; the 64-key tiles of the block's windows stream through two buffers.
//    S = Q K^T, dP = dO V^T (SS), dq += dX K (RS, K viewed [d, 64 keys] as the forward views V).
//  * dk/dv kernel, one CTA per (segment, 64-key tile, kv head): K and V stay resident; the query
//    blocks whose windows reach the tile (every head chunk) stream through two buffers.
//    S^T = K Q^T, dP^T = V dO^T (SS: the accumulators' columns are query rows, whose row terms are
//    read per column from shared memory), dV += P^T dO, dK += dX^T Q (RS, dO and Q viewed [d, 64 rows]).
//  * cu_seqlens values are clamped (window_bounds.cuh); rows and channels outside the tensors are
//    zero-filled by cp.async and never read, so no value of them leaves the tensors.
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

namespace sinkops::cuda::sm90 {

// Tuning knobs (tools/prof/variant_so.sh builds variants with -D...): buffers of the streamed tiles
// at d <= 64 (wider head dims keep 2: a third would cost a CTA per SM), and the dk/dv kernel's
// minimum CTAs per SM (its register cap).
#ifndef SINKOPS_WBWD_DQ_STAGES
#define SINKOPS_WBWD_DQ_STAGES 2
#endif
#ifndef SINKOPS_WBWD_DKDV_STAGES
#define SINKOPS_WBWD_DKDV_STAGES 2
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
  };
  static constexpr int kSmemBytes = sizeof(Smem);
};
template <typename T, int kHeadDim>
using WindowBwdDqConfig = WindowBwdConfig<T, kHeadDim, kHeadDim <= 64 ? SINKOPS_WBWD_DQ_STAGES : 2>;
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
// One CTA per (block of Pw positions, kv head x head chunk, segment; segments past grid z looped):
// the row terms first (D from O and dO in global memory, while the block's Q / dO copies land),
// then the key tiles of the block's windows, double-buffered.
template <typename Tg, int kHeadDim, typename Sink>
__global__ void __launch_bounds__(128, 3)
    window_attention_bwd_dq_sm90_kernel(const __grid_constant__ WindowAttentionBackwardParams p,
                                        const __grid_constant__ WindowBwdShape shape) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = typename CuteElement<Tg>::type;
  using C = WindowBwdDqConfig<T, kHeadDim>;
  constexpr int S = C::kStages;
  using window_attention::row_bounds_diag;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<typename C::Smem*>(smem_raw);
  const int t = threadIdx.x;
  const int pw = shape.pw, pw_shift = __ffs(pw) - 1;
  const int hk = blockIdx.y / shape.head_chunks;
  const int h0 = hk * shape.group + (blockIdx.y % shape.head_chunks) * shape.hc;  // the block's first head
  const float c = shape.scale_log2;
  const Tg* q = static_cast<const Tg*>(p.q);
  const Tg* k = static_cast<const Tg*>(p.k);
  const Tg* v = static_cast<const Tg*>(p.v);
  const Tg* out = static_cast<const Tg*>(p.out);
  const Tg* dout = static_cast<const Tg*>(p.dout);
  auto sQ = make_tensor(make_smem_ptr(sm.resident[0]), typename C::Tile{});
  auto sO = make_tensor(make_smem_ptr(sm.resident[1]), typename C::Tile{});
  if (const RowsOutside o = rows_outside(p.cu_seqlens_q, p.batch, p.total_q); o.count() > 0) {  // CTA-uniform
    zero_rows_outside(o, static_cast<Tg*>(p.dq), p.dq_row_stride, p.dq_head_stride, p.h_q, p.d);
    if (p.dsink_rows != nullptr) zero_rows_outside(o, p.dsink_rows, p.h_q);
  }

  for (int b = blockIdx.z; b < p.batch; b += gridDim.z) {
    int64_t q_start, k_start;
    int sq, sk;
    window_attention::segment_pair(p, b, q_start, sq, k_start, sk);
    const int64_t pos0_64 = int64_t(blockIdx.x) * pw;
    if (pos0_64 >= sq) continue;  // CTA-uniform
    const int pos0 = int(pos0_64), live = sq - pos0 < pw ? sq - pos0 : pw;  // positions of the block
    const int off = sk - sq;  // pos + off of a row (pos < sq) lies in (-2^31, sk): no overflow
    auto row_head = [&](int r) { return h0 + (r >> pw_shift); };
    auto row_rel = [&](int r) { return r & (pw - 1); };
    auto q_row = [&](int r) { return q_start + pos0 + row_rel(r); };
    copy_tile_pair<C>(sQ, sO, t,
                      TileSource<Tg>{q + (q_start + pos0) * p.q_row_stride + int64_t(h0) * p.q_head_stride,
                                     int(p.q_row_stride), int(p.q_head_stride), p.d},
                      TileSource<Tg>{dout + (q_start + pos0) * p.dout_row_stride + int64_t(h0) * p.dout_head_stride,
                                     int(p.dout_row_stride), int(p.dout_head_stride), p.d_v},
                      pw - 1, pw_shift, live, q);
    cp_async_commit();
    // The keys of the block's rows: its first position's first key to its last position's last key
    // (both window bounds grow with the position). The first S - 1 tiles load while the row terms
    // compute; one cp.async group per tile (empty past the last), so group counts stay uniform.
    int lo_first, hi_first, lo_last, hi_last;
    row_bounds_diag(pos0 + off, p.window_left, p.window_right, sk, lo_first, hi_first);
    row_bounds_diag(pos0 + live - 1 + off, p.window_left, p.window_right, sk, lo_last, hi_last);
    const int ta = lo_first / 64, tb = hi_last >= lo_first ? hi_last / 64 : ta - 1;
    auto load_tile = [&](int g, int buf) {
      auto sK = make_tensor(make_smem_ptr(sm.streamed[buf][0]), typename C::Tile{});
      auto sV = make_tensor(make_smem_ptr(sm.streamed[buf][1]), typename C::Tile{});
      const int kt = 64 * g;
      copy_tile_pair<C>(sK, sV, t,
                        TileSource<Tg>{k + (k_start + kt) * p.k_row_stride + int64_t(hk) * p.k_head_stride,
                                       int(p.k_row_stride), 0, p.d},
                        TileSource<Tg>{v + (k_start + kt) * p.v_row_stride + int64_t(hk) * p.v_head_stride,
                                       int(p.v_row_stride), 0, p.d_v},
                        63, 6, sk - kt, k);
    };
#pragma unroll
    for (int i = 0; i < S - 1; ++i) {
      if (ta + i <= tb) load_tile(ta + i, i);
      cp_async_commit();
    }

    // ---- the row terms: two threads per row (a pair of lanes), D = <dO, O> in float32 ----
    {
      const int r = t >> 1, half = t & 1;
      const bool ok = row_rel(r) < live;
      const int64_t row = q_row(r), head = row_head(r);
      // issued before the D loop's loads, so that both return in one memory round trip
      const float lse = ok ? p.lse[head * p.lse_head_stride + row] : INFINITY;
      const float g_lse = ok && p.dlse != nullptr ? p.dlse[head * p.dlse_head_stride + row] : 0.f;
      const float sink_s = p.sinks != nullptr ? p.sinks[head] : -INFINITY;
      float dsum = 0.f;
      if (ok) {
        const Tg* o_row = out + q_row(r) * p.out_row_stride + row_head(r) * p.out_head_stride;
        const Tg* do_row = dout + q_row(r) * p.dout_row_stride + row_head(r) * p.dout_head_stride;
#pragma unroll
        for (int j = half * 8; j < kHeadDim; j += 16)  // unrolled: every load in flight at once
          if (j < p.d_v)
            dsum += dot8<Tg>(*reinterpret_cast<const uint4*>(o_row + j), *reinterpret_cast<const uint4*>(do_row + j));
      }
      dsum += __shfl_xor_sync(0xffffffffu, dsum, 1);
      if (half == 0) {
        float lse2 = INFINITY, rr = 0.f, delta = 0.f;
        if (ok) {
          const sink::BackwardRow br = Sink::backward_row(lse, dsum, g_lse, sink_s);
          const int64_t at = head * p.total_q + row;
          p.row_r[at] = br.r;
          p.row_delta[at] = br.delta;
          if (!Sink::kKey0Bias && p.sinks != nullptr) p.dsink_rows[at] = br.dsink;
          lse2 = lse * sink::kLog2e, rr = br.r, delta = br.delta;
        }
        sm.rows[0][r] = make_float4(lse2, rr, delta, 0.f);
      }
    }
    __syncthreads();  // the row terms in shared memory
    // This thread's two accumulator rows: their terms, windows and (key0) sink bias.
    float lse2[2], rr[2], dl[2], bias[2] = {0.f, 0.f}, dsink_row[2] = {0.f, 0.f};
    int lo[2], hi[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = acc_row(h, t);
      const float4 terms = sm.rows[0][r];
      lse2[h] = terms.x, rr[h] = terms.y, dl[h] = terms.z;
      if (row_rel(r) < live) {
        row_bounds_diag(pos0 + row_rel(r) + off, p.window_left, p.window_right, sk, lo[h], hi[h]);
      } else {
        lo[h] = 1, hi[h] = 0;  // no such row: sees nothing
      }
      if (hi[h] < lo[h]) lo[h] = 0x7fffffff, hi[h] = 0x7fffffff;  // empty: no kn < sk passes the test below
      if constexpr (Sink::kKey0Bias) {
        // a +inf sink: its rows output v_0 and have lse +inf, so Q and dX are 0 (bias unused)
        const float s = p.sinks != nullptr ? p.sinks[row_head(r)] : 0.f;
        bias[h] = s == INFINITY ? 0.f : s * sink::kLog2e;
      }
    }
    Tensor acc_dq = partition_fragment_C(typename C::MmaG{}, Shape<_64, Int<kHeadDim>>{});
    clear(acc_dq);
    for (int g = ta, buf = 0; g <= tb; ++g, buf = next_buffer(buf, S)) {
      // tile g + S - 1 into the buffer of tile g - 1, which every thread left at the last barrier
      if (g + S - 1 <= tb) load_tile(g + S - 1, buf == 0 ? S - 1 : buf - 1);
      cp_async_commit();
      cp_async_wait_group<S - 1>();
      __syncthreads();  // every thread's copies of this tile (and of Q / dO) have landed
      auto sK = make_tensor(make_smem_ptr(sm.streamed[buf][0]), typename C::Tile{});
      auto sV = make_tensor(make_smem_ptr(sm.streamed[buf][1]), typename C::Tile{});
      auto sKt = make_tensor(make_smem_ptr(sm.streamed[buf][0]), typename C::TileT{});
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
      const int kt = 64 * g;
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
        dx_reg(i) = T(acc_s(i) * (rr[h] * acc_dp(i) - dl[h]));
      }
      if (key0) {  // the key0 sink's row gradient: dX of key 0 (elements 0 and 2)
        dsink_row[0] += acc_s(0) * (rr[0] * acc_dp(0) - dl[0]);
        dsink_row[1] += acc_s(2) * (rr[1] * acc_dp(2) - dl[1]);
      }
      wgmma_rs(typename C::MmaG{}, dx_reg, sKt, acc_dq, t);
      warpgroup_commit_batch();
      warpgroup_wait<0>();
      __syncthreads();  // buffer buf is read by every thread before tile g + S lands in it
    }
    cp_async_wait_group<0>();  // (no key tile: the Q / dO copies still land before their buffers are reused)
    warpgroup_fence_operand(acc_dq);  // read only after the last wgmma's wait
    // ---- dq (times the scale), the key0 sink's row gradients ----
    Tg* dq_row[2];  // this thread's two accumulator rows
    bool dq_ok[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = acc_row(h, t);
      dq_ok[h] = row_rel(r) < live;
      dq_row[h] = static_cast<Tg*>(p.dq) + q_row(r) * p.dq_row_stride + row_head(r) * p.dq_head_stride;
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
          p.dsink_rows[int64_t(row_head(r)) * p.total_q + q_row(r)] = lo[h] == 0 && hi[h] >= 0 ? dsink_row[h] : 0.f;
      }
    }
    __syncthreads();  // the next segment's copies reuse every buffer
  }
#endif
}

// -------------------------------------------------------------------------------------- dk/dv
// One CTA per (64-key tile, kv head, segment; segments past grid z looped): K, V resident, the
// query blocks (every head chunk x the positions whose windows reach the tile) streamed.
template <typename Tg, int kHeadDim, typename Sink>
__global__ void __launch_bounds__(128, SINKOPS_WBWD_DKDV_CTAS)
    window_attention_bwd_dkdv_sm90_kernel(const __grid_constant__ WindowAttentionBackwardParams p,
                                          const __grid_constant__ WindowBwdShape shape) {
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
    auto load_block = [&](int buf) {
      const int h0 = loading.h0, pos0 = loading.pos0;
      loading.next(m_lo, pw, n_pos_blocks, hc);
      auto sQ = make_tensor(make_smem_ptr(sm.streamed[buf][0]), typename C::Tile{});
      auto sO = make_tensor(make_smem_ptr(sm.streamed[buf][1]), typename C::Tile{});
      const int64_t row0 = q_start + pos0;
      copy_tile_pair<C>(sQ, sO, t,
                        TileSource<Tg>{q + row0 * p.q_row_stride + int64_t(h0) * p.q_head_stride, int(p.q_row_stride),
                                       int(p.q_head_stride), p.d},
                        TileSource<Tg>{dout + row0 * p.dout_row_stride + int64_t(h0) * p.dout_head_stride,
                                       int(p.dout_row_stride), int(p.dout_head_stride), p.d_v},
                        pw - 1, pw_shift, sq - pos0, q);
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
    // The first S - 1 blocks (the key tile's copies ride in the first one's group); one cp.async
    // group per block, empty past the last, so group counts stay uniform.
#pragma unroll
    for (int i = 0; i < S - 1; ++i) {
      if (i < n_blocks) load_block(i);
      cp_async_commit();
    }
    for (int blk = 0, buf = 0; blk < n_blocks; ++blk, buf = next_buffer(buf, S)) {
      // block blk + S - 1 into the buffer of block blk - 1, which every thread left at the last barrier
      if (blk + S - 1 < n_blocks) load_block(buf == 0 ? S - 1 : buf - 1);
      cp_async_commit();
      cp_async_wait_group<S - 1>();
      __syncthreads();  // every thread's copies of this block (and of the key tile) have landed
      auto sQ = make_tensor(make_smem_ptr(sm.streamed[buf][0]), typename C::Tile{});
      auto sO = make_tensor(make_smem_ptr(sm.streamed[buf][1]), typename C::Tile{});
      auto sQt = make_tensor(make_smem_ptr(sm.streamed[buf][0]), typename C::TileT{});
      auto sOt = make_tensor(make_smem_ptr(sm.streamed[buf][1]), typename C::TileT{});
      Tensor acc_s = partition_fragment_C(typename C::MmaS{}, Shape<_64, _64>{});   // S^T
      Tensor acc_dp = partition_fragment_C(typename C::MmaS{}, Shape<_64, _64>{});  // dP^T
      // Four groups in flight order: S^T, dP^T; then dV (issued once P is known, while dX is
      // computed) and dK. The exponentials run while dP^T is in the tensor cores.
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
        p_reg(i) = T(prob * terms.y);
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
        dx_reg(i) = T(acc_s(i) * (terms.y * acc_dp(i) - terms.z));
      }
      wgmma_rs(typename C::MmaG{}, dx_reg, sQt, acc_dk, t);
      warpgroup_commit_batch();
      warpgroup_wait<0>();
      __syncthreads();  // buffer buf is read by every thread before block blk + S lands in it
    }
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
  const int dq = WindowBwdDqConfig<cutlass::bfloat16_t, kHeadDim>::kSmemBytes;
  const int dkdv = WindowBwdDkdvConfig<cutlass::bfloat16_t, kHeadDim>::kSmemBytes;
  return dq > dkdv ? dq : dkdv;
}

template <typename Tg, int kHeadDim, typename Sink>
void launch_window_attention_bwd(const WindowAttentionBackwardParams& p, const WindowBwdShape& dq_shape,
                                 const WindowBwdShape& dkdv_shape, int batch_z, cudaStream_t stream) {
  using T = typename CuteElement<Tg>::type;
  constexpr int kDqSmem = WindowBwdDqConfig<T, kHeadDim>::kSmemBytes;
  constexpr int kDkdvSmem = WindowBwdDkdvConfig<T, kHeadDim>::kSmemBytes;
  constexpr auto dq_kernel = window_attention_bwd_dq_sm90_kernel<Tg, kHeadDim, Sink>;
  constexpr auto dkdv_kernel = window_attention_bwd_dkdv_sm90_kernel<Tg, kHeadDim, Sink>;
  reserve_dynamic_smem<dq_kernel>(kDqSmem, "window_attention_backward (sm90 dq)", true);
  reserve_dynamic_smem<dkdv_kernel>(kDkdvSmem, "window_attention_backward (sm90 dk/dv)", true);
  // the dq kernel writes the row terms the dk/dv kernel reads: same stream, in this order
  dq_kernel<<<dim3(dq_shape.blocks, p.h_k * dq_shape.head_chunks, batch_z), 128, kDqSmem, stream>>>(p, dq_shape);
  check_launch("window_attention_backward (sm90 dq)");
  dkdv_kernel<<<dim3(dkdv_shape.blocks, p.h_k, batch_z), 128, kDkdvSmem, stream>>>(p, dkdv_shape);
  check_launch("window_attention_backward (sm90 dk/dv)");
}

}  // namespace sinkops::cuda::sm90
