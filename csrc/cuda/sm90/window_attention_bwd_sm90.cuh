// DRAFT (2026-12-02): the dq and dk/dv kernels of a Hopper window-attention backward.
// Compile-checked with tools/prof/check_window_bwd_sm90.sh (ptxas: registers, spills, HGMMA count);
// NOT RUN on a GPU, not wired into any launcher or backend. bench/NOTES.md "Backward v2" has the
// plan this follows, what is still to write (the params X-macro list, the launcher, the CUDA
// backend's window_attention_backward) and the checks it owes (the backward GPU suite, memcheck,
// racecheck).
//
// Math (docs/DESIGN.md §6), per query row i of the kv head's group and key j of its window, in log2
// units: x = c s_ij (+ the key0 bias on key 0), Q_ij = 2^(x - lse2_i), P = r_i Q, dX = Q (r_i dP -
// delta_i), dP_ij = <dO_i, v_j>; dK_j = scale sum_i dX_ij q_i, dV_j = sum_i P_ij dO_i. The row terms
// lse2 = lse log2 e, r and delta come from the dq kernel (as in sinkops/triton/window_attention_backward.py).
//
// Work split: one CTA (one warpgroup) per (segment, 64-key tile, kv head), looping over the query
// blocks whose windows reach the tile. A block is 64 rows folded as in the forward: Pw consecutive
// positions x Hc heads of the group (Hc Pw = 64, head-major: row r = head r / Pw, position r % Pw).
// Per block, every operand in a layout the forward already uses:
//   S^T  = K Q^T            SS wgmma, A = the K tile [64 keys, d] (K-major), B = the Q tile [64 rows, d]
//   dP^T = V dO^T           SS wgmma, A = the V tile, B = the dO tile
//   dV  += P^T dO           RS wgmma, A = P^T from registers, B = the dO tile viewed [d_v, 64 rows] (MN-major)
//   dK  += dX^T Q           RS wgmma, A = dX^T from registers, B = the Q tile viewed [d, 64 rows]
// The accumulators' columns are query rows, so the row terms are read per column from shared memory.
// Q / dO tiles are double-buffered with cp.async groups: block b + 1 loads while block b computes.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "../mma_sm80.cuh"  // ptx::exp2_approx
#include "../sink_policy.cuh"  // sink::kLog2e
#include "../window_bounds.cuh"
#include "wgmma.cuh"

namespace sinkops::cuda::sm90 {

// The draft's own argument block (the wiring replaces it by an X-macro params list).
struct WindowBwdDkdvArgs {
  const void* q;     // [total_q, hq, d]    q's dtype
  const void* k;     // [total_k, hk, d]
  const void* v;     // [total_k, hk, d_v]
  const void* dout;  // [total_q, hq, d_v]
  const float* lse;    // [hq, total_q] natural log (+inf: the row saw nothing)
  const float* r;      // [hq, total_q] 1 - p_sink (0 where lse = +inf), from the dq kernel
  const float* delta;  // [hq, total_q] r D - dlse, from the dq kernel
  const float* sinks;  // [hq] or nullptr (key0 sink only; the null sink enters through r)
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  void* dk;  // [total_k, hk, d]
  void* dv;  // [total_k, hk, d_v]
  int64_t total_q, total_k;
  int64_t q_row_stride, q_head_stride, k_row_stride, k_head_stride, v_row_stride, v_head_stride;
  int64_t do_row_stride, do_head_stride, dk_row_stride, dk_head_stride, dv_row_stride, dv_head_stride;
  int64_t rows_stride;  // of lse, r, delta (their head stride)
  int batch, group, d, d_v, window_left, window_right, n_key_tiles;
  float scale, scale_log2;  // softmax scale, and it times log2 e
};

template <typename T, int kHeadDim>
struct WindowBwdConfig {
  static constexpr int kThreads = 128;  // one warpgroup
  static constexpr int kChunks = kHeadDim / 8;
  using Atom = conditional_t<kHeadDim % 64 == 0, GMMA::Layout_K_SW128_Atom<T>,
                             conditional_t<kHeadDim % 32 == 0, GMMA::Layout_K_SW64_Atom<T>, GMMA::Layout_K_SW32_Atom<T>>>;
  using Tile = decltype(tile_to_shape(Atom{}, Shape<_64, Int<kHeadDim>>{}, Step<_1, _2>{}));  // [64 rows, d]
  using TileT = decltype(composition(Tile{}, Layout<Shape<Int<kHeadDim>, _64>, Stride<_64, _1>>{}));  // [d, 64 rows]
  using MmaS = decltype(make_tiled_mma(GMMA::ss_op_selector<T, T, float, Shape<_64, _64, _16>>()));
  using MmaG = decltype(make_tiled_mma(
      GMMA::rs_op_selector<T, T, float, Shape<_64, Int<kHeadDim>, _16>, GMMA::Major::K, GMMA::Major::MN>()));
  struct Smem {
    alignas(1024) T k[64 * kHeadDim];
    alignas(1024) T v[64 * kHeadDim];
    alignas(1024) T q[2][64 * kHeadDim];   // [buffer] Q block
    alignas(1024) T dout[2][64 * kHeadDim];  // [buffer] dO block
    float lse2[2][64], r[2][64], delta[2][64];
  };
};

// The CuTe element type of a CUDA 16-bit type.
template <typename Tg>
using BwdElement = conditional_t<std::is_same_v<Tg, __nv_bfloat16>, cutlass::bfloat16_t, cutlass::half_t>;

// Copies 64 rows into two [64, d] tiles with cp.async (every thread of the warpgroup a share):
// tile A gets row_a(r)'s first d_a channels, tile B row_b(r)'s first d_b; a null row pointer and
// channels past d_a / d_b are zero-filled and read nothing (`dummy`: a valid address never read).
template <typename C, typename Tile, typename Tg, typename RowA, typename RowB>
__device__ __forceinline__ void copy_tile_pair(Tile& sA, Tile& sB, int t, int d_a, int d_b, RowA row_a, RowB row_b,
                                               const Tg* dummy) {
  for (int idx = t; idx < 64 * C::kChunks; idx += 128) {
    const int r = idx / C::kChunks, col = (idx % C::kChunks) * 8;
    const Tg* a = row_a(r);
    const Tg* b = row_b(r);
    const bool a_ok = a != nullptr && col < d_a, b_ok = b != nullptr && col < d_b;
    cp_async_16_zfill_l2(&sA(r, col), a_ok ? a + col : dummy, a_ok);
    cp_async_16_zfill_l2(&sB(r, col), b_ok ? b + col : dummy, b_ok);
  }
}

template <typename Tg, int kHeadDim, bool kKey0>
__global__ void __launch_bounds__(128, 1) window_attention_bwd_dkdv_sm90_kernel(const __grid_constant__ WindowBwdDkdvArgs p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = BwdElement<Tg>;
  using C = WindowBwdConfig<T, kHeadDim>;
  using window_attention::row_bounds_diag;
  using window_attention::segment_bounds;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<typename C::Smem*>(smem_raw);
  const int t = threadIdx.x;
  const int b = blockIdx.x / p.n_key_tiles, tile = blockIdx.x % p.n_key_tiles, hk = blockIdx.y;
  int64_t q_start, k_start;
  int sq, sk;
  segment_bounds(p.cu_seqlens_q, b, p.total_q, q_start, sq);
  segment_bounds(p.cu_seqlens_k, b, p.total_k, k_start, sk);
  const int kt = tile * 64;
  if (kt >= sk) return;  // CTA-uniform
  const int off = sk - sq;
  // Rows of a block: Hc heads x Pw positions (the group's heads in chunks of up to 64). Contract
  // for the launcher: group is a power of two (else Pw = 64 / Hc is not, and the row split breaks).
  const int hc = p.group < 64 ? p.group : 64;
  const int pw = 64 / hc, pw_shift = __ffs(pw) - 1;
  // Query positions whose window reaches keys [kt, kt + 63]: i + off - left <= kt + 63, i + off + right >= kt.
  int m_lo = 0, m_hi = sq;
  if (p.window_right >= 0) m_lo = max(kt - off - p.window_right, 0);
  if (p.window_left >= 0) m_hi = min(kt + 63 - off + p.window_left + 1, sq);
  m_lo = m_lo / pw * pw;
  const int n_pos_blocks = m_hi > m_lo ? (m_hi - m_lo + pw - 1) / pw : 0;
  const int n_head_chunks = (p.group + hc - 1) / hc;
  const int n_blocks = n_pos_blocks * n_head_chunks;

  const Tg* q = static_cast<const Tg*>(p.q);
  const Tg* k = static_cast<const Tg*>(p.k);
  const Tg* v = static_cast<const Tg*>(p.v);
  const Tg* dout = static_cast<const Tg*>(p.dout);
  auto sK = make_tensor(make_smem_ptr(sm.k), typename C::Tile{});
  auto sV = make_tensor(make_smem_ptr(sm.v), typename C::Tile{});
  // ---- the key tile (keys past the segment and channels past d / d_v are zero-filled) ----
  auto load_keys = [&]() {
    copy_tile_pair<C>(sK, sV, t, p.d, p.d_v,
        [&](int r) { return r < sk - kt ? k + (k_start + kt + r) * p.k_row_stride + hk * p.k_head_stride : nullptr; },
        [&](int r) { return r < sk - kt ? v + (k_start + kt + r) * p.v_row_stride + hk * p.v_head_stride : nullptr; }, k);
  };
  // ---- block blk: rows (head chunk blk / n_pos_blocks, positions m_lo + pw (blk % n_pos_blocks) ..) ----
  auto block_head0 = [&](int blk) { return hk * p.group + (blk / n_pos_blocks) * hc; };
  auto block_pos0 = [&](int blk) { return m_lo + pw * (blk % n_pos_blocks); };
  auto load_block = [&](int blk, int buf) {
    const int h0 = block_head0(blk), pos0 = block_pos0(blk);
    auto sQ = make_tensor(make_smem_ptr(sm.q[buf]), typename C::Tile{});
    auto sO = make_tensor(make_smem_ptr(sm.dout[buf]), typename C::Tile{});
    auto ok = [&](int r) { return pos0 + (r & (pw - 1)) < sq && h0 + (r >> pw_shift) < (hk + 1) * p.group; };
    copy_tile_pair<C>(sQ, sO, t, p.d, p.d_v,
        [&](int r) {
          return ok(r) ? q + (q_start + pos0 + (r & (pw - 1))) * p.q_row_stride + (h0 + (r >> pw_shift)) * p.q_head_stride
                       : nullptr;
        },
        [&](int r) {
          return ok(r) ? dout + (q_start + pos0 + (r & (pw - 1))) * p.do_row_stride +
                             (h0 + (r >> pw_shift)) * p.do_head_stride
                       : nullptr;
        },
        q);
    if (t < 64) {  // the row terms; rows outside the segment get lse +inf (they then see nothing)
      const int head = h0 + (t >> pw_shift), pos = pos0 + (t & (pw - 1));
      const bool row_ok = pos < sq && head < (hk + 1) * p.group;
      const int64_t at = int64_t(head) * p.rows_stride + q_start + pos;
      sm.lse2[buf][t] = row_ok ? p.lse[at] * sink::kLog2e : INFINITY;
      sm.r[buf][t] = row_ok ? p.r[at] : 0.f;
      sm.delta[buf][t] = row_ok ? p.delta[at] : 0.f;
    }
    cp_async_commit();
  };

  Tensor acc_dk = partition_fragment_C(typename C::MmaG{}, Shape<_64, Int<kHeadDim>>{});
  Tensor acc_dv = partition_fragment_C(typename C::MmaG{}, Shape<_64, Int<kHeadDim>>{});
  clear(acc_dk);
  clear(acc_dv);
  const float c = p.scale_log2;
  if (n_blocks > 0) {
    load_keys();
    load_block(0, 0);  // the key tile's copies ride in this block's group
  }
  for (int blk = 0; blk < n_blocks; ++blk) {
    const int buf = blk & 1;
    if (blk + 1 < n_blocks) {
      load_block(blk + 1, buf ^ 1);
      cp_async_wait_group<1>();
    } else {
      cp_async_wait_group<0>();
    }
    __syncthreads();  // every thread's copies of this block (and the key tile) have landed
    auto sQ = make_tensor(make_smem_ptr(sm.q[buf]), typename C::Tile{});
    auto sO = make_tensor(make_smem_ptr(sm.dout[buf]), typename C::Tile{});
    auto sQt = make_tensor(make_smem_ptr(sm.q[buf]), typename C::TileT{});
    auto sOt = make_tensor(make_smem_ptr(sm.dout[buf]), typename C::TileT{});
    Tensor acc_s = partition_fragment_C(typename C::MmaS{}, Shape<_64, _64>{});   // S^T, then P^T
    Tensor acc_dp = partition_fragment_C(typename C::MmaS{}, Shape<_64, _64>{});  // dP^T, then dX^T
    wgmma_ss(typename C::MmaS{}, sK, sQ, acc_s, true, t);
    wgmma_ss(typename C::MmaS{}, sV, sO, acc_dp, true, t);
    warpgroup_commit_batch();
    warpgroup_wait<0>();
    const int h0 = block_head0(blk), pos0 = block_pos0(blk);
    Tensor p_reg = make_tensor<T>(partition_shape_A(typename C::MmaG{}, Shape<_64, _64>{}));   // P^T (16-bit)
    Tensor dx_reg = make_tensor<T>(partition_shape_A(typename C::MmaG{}, Shape<_64, _64>{}));  // dX^T
#pragma unroll
    for (int i = 0; i < size(acc_s); ++i) {
      const int key = acc_row((i / 2) % 2, t), col = acc_col(i, t);  // accumulator row = key, column = query row
      const int kn = kt + key, pos = pos0 + (col & (pw - 1)), head = h0 + (col >> pw_shift);
      int lo, hi;
      row_bounds_diag(pos + off, p.window_left, p.window_right, sk, lo, hi);
      const bool visible = pos < sq && kn >= lo && kn <= hi;
      float x = acc_s(i) * c;
      bool inf_key0 = false;
      if constexpr (kKey0) {
        if (kn == 0 && p.sinks != nullptr) {
          const float s = p.sinks[head];
          inf_key0 = s == INFINITY;  // its rows output v_0: P one-hot there, Q and dX 0
          x += inf_key0 ? 0.f : s * sink::kLog2e;
        }
      }
      const float lse2 = sm.lse2[buf][col], r = sm.r[buf][col], delta = sm.delta[buf][col];
      const float prob = visible ? ptx::exp2_approx(x - lse2) : 0.f;  // 0 where lse = +inf
      const float pr = inf_key0 && visible ? 1.f : prob * r;
      p_reg(i) = T(pr);
      dx_reg(i) = T(prob * (r * acc_dp(i) - delta));
    }
    wgmma_rs(typename C::MmaG{}, p_reg, sOt, acc_dv, t);
    wgmma_rs(typename C::MmaG{}, dx_reg, sQt, acc_dk, t);
    warpgroup_commit_batch();
    warpgroup_wait<0>();
    __syncthreads();  // buffer buf is read by every thread's wgmma before block blk + 2 overwrites it
  }
  // ---- dK (times the scale), dV: keys of the segment, channels below d / d_v ----
  Tg* dk = static_cast<Tg*>(p.dk);
  Tg* dv = static_cast<Tg*>(p.dv);
#pragma unroll
  for (int i = 0; i < size(acc_dk); i += 2) {
    const int key = acc_row((i / 2) % 2, t), col = acc_col(i, t);
    if (kt + key >= sk) continue;
    const int64_t row = k_start + kt + key;
    if (col < p.d) {
      dk[row * p.dk_row_stride + hk * p.dk_head_stride + col] = Tg(acc_dk(i) * p.scale);
      if (col + 1 < p.d) dk[row * p.dk_row_stride + hk * p.dk_head_stride + col + 1] = Tg(acc_dk(i + 1) * p.scale);
    }
    if (col < p.d_v) {
      dv[row * p.dv_row_stride + hk * p.dv_head_stride + col] = Tg(acc_dv(i));
      if (col + 1 < p.d_v) dv[row * p.dv_row_stride + hk * p.dv_head_stride + col + 1] = Tg(acc_dv(i + 1));
    }
  }
#endif
}


// The dq kernel's arguments (the draft's own; the wiring replaces them by an X-macro params list).
struct WindowBwdDqArgs {
  const void* q;     // [total_q, hq, d]
  const void* k;     // [total_k, hk, d]
  const void* v;     // [total_k, hk, d_v]
  const void* out;   // [total_q, hq, d_v]  the forward's output
  const void* dout;  // [total_q, hq, d_v]
  const float* lse;   // [hq, total_q]
  const float* dlse;  // [hq, total_q] or nullptr
  const float* sinks;  // [hq] or nullptr
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  void* dq;             // [total_q, hq, d]
  float* r;             // [hq, total_q] written: 1 - p_sink (0 where lse = +inf)
  float* delta;         // [hq, total_q] written: r D - dlse
  float* dsink_rows;    // [hq, total_q] written when sinks: the row's sink gradient (zeroed by the
                        // launcher: a key0 row that does not see key 0 writes nothing)
  int64_t total_q, total_k;
  int64_t q_row_stride, q_head_stride, k_row_stride, k_head_stride, v_row_stride, v_head_stride;
  int64_t o_row_stride, o_head_stride, do_row_stride, do_head_stride, dq_row_stride, dq_head_stride;
  int64_t rows_stride;  // of lse, dlse, r, delta, dsink_rows (their head stride)
  int batch, group, d, d_v, window_left, window_right, n_query_blocks;
  float scale, scale_log2;
};

// One CTA (one warpgroup) per (segment, block of Pw positions x Hc heads, kv head, head chunk):
// the row terms first (D = <dO, O>, r, delta, the null sink's row gradient -p_sink D), then the
// key tiles of the block's windows, double-buffered: S = Q K^T, dP = dO V^T (SS), Q = 2^(c s - lse2),
// dX = Q (r dP - delta), dq += dX K (RS, K viewed [d, 64 keys]). The key0 sink's row gradient is the
// dX of key 0. Accumulator rows are query rows here, so the row terms sit in two registers a thread.
template <typename Tg, int kHeadDim, int kSinkMode>  // kSinkMode: 0 none, 1 key0, 2 null
__global__ void __launch_bounds__(128, 1) window_attention_bwd_dq_sm90_kernel(const __grid_constant__ WindowBwdDqArgs p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = BwdElement<Tg>;
  using C = WindowBwdConfig<T, kHeadDim>;
  using window_attention::row_bounds_diag;
  using window_attention::segment_bounds;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // Reuses the dk/dv kernel's layout: k / v are the block's Q and dO, q / dout[buf] the key tiles' K and V.
  auto& sm = *reinterpret_cast<typename C::Smem*>(smem_raw);
  const int t = threadIdx.x;
  const int b = blockIdx.x / p.n_query_blocks, qb = blockIdx.x % p.n_query_blocks;
  const int hc = p.group < 64 ? p.group : 64;  // a power of two (the launcher's contract)
  const int pw = 64 / hc, pw_shift = __ffs(pw) - 1;
  const int hk = blockIdx.y, h0 = hk * p.group + blockIdx.z * hc;
  int64_t q_start, k_start;
  int sq, sk;
  segment_bounds(p.cu_seqlens_q, b, p.total_q, q_start, sq);
  segment_bounds(p.cu_seqlens_k, b, p.total_k, k_start, sk);
  const int pos0 = qb * pw;
  if (pos0 >= sq) return;  // CTA-uniform
  const int off = sk - sq;
  const Tg* q = static_cast<const Tg*>(p.q);
  const Tg* k = static_cast<const Tg*>(p.k);
  const Tg* v = static_cast<const Tg*>(p.v);
  const Tg* dout = static_cast<const Tg*>(p.dout);
  const Tg* out = static_cast<const Tg*>(p.out);
  auto sQ = make_tensor(make_smem_ptr(sm.k), typename C::Tile{});
  auto sO = make_tensor(make_smem_ptr(sm.v), typename C::Tile{});
  auto row_head = [&](int r) { return h0 + (r >> pw_shift); };
  auto row_pos = [&](int r) { return pos0 + (r & (pw - 1)); };
  auto row_ok = [&](int r) { return row_pos(r) < sq && row_head(r) < (hk + 1) * p.group; };
  copy_tile_pair<C>(sQ, sO, t, p.d, p.d_v,
      [&](int r) {
        return row_ok(r) ? q + (q_start + row_pos(r)) * p.q_row_stride + row_head(r) * p.q_head_stride : nullptr;
      },
      [&](int r) {
        return row_ok(r) ? dout + (q_start + row_pos(r)) * p.do_row_stride + row_head(r) * p.do_head_stride : nullptr;
      },
      q);
  cp_async_commit();
  // ---- the row terms: row t (< 64) of the block, D from global memory in float32 ----
  if (t < 64 && row_ok(t)) {
    const int64_t row = q_start + row_pos(t), at = int64_t(row_head(t)) * p.rows_stride + row;
    const Tg* o_row = out + row * p.o_row_stride + row_head(t) * p.o_head_stride;
    const Tg* do_row = dout + row * p.do_row_stride + row_head(t) * p.do_head_stride;
    const float lse = p.lse[at];
    const bool seen = lse != INFINITY;
    float dsum = 0.f;  // (one thread per row, element by element: to vectorize once it runs)
    for (int j = 0; j < p.d_v; ++j) dsum += float(o_row[j]) * float(do_row[j]);
    const float d_row = seen ? dsum : 0.f;
    const float g_lse = seen && p.dlse != nullptr ? p.dlse[at] : 0.f;
    float r = seen ? 1.f : 0.f;
    if constexpr (kSinkMode == 2) {
      if (p.sinks != nullptr) {
        const float s = p.sinks[row_head(t)];
        // r = sigmoid(lse - s), p_sink = sigmoid(s - lse): exact at s = -inf (r 1) and +inf (r 0)
        r = seen ? 1.f / (1.f + exp2f((s - lse) * sink::kLog2e)) : 0.f;
        const float p_sink = seen ? 1.f / (1.f + exp2f((lse - s) * sink::kLog2e)) : 0.f;
        p.dsink_rows[at] = -p_sink * d_row;
      }
    }
    p.r[at] = r;
    p.delta[at] = r * d_row - g_lse;
    sm.lse2[0][t] = lse * sink::kLog2e;
    sm.r[0][t] = r;
    sm.delta[0][t] = r * d_row - g_lse;
  } else if (t < 64) {
    sm.lse2[0][t] = INFINITY, sm.r[0][t] = 0.f, sm.delta[0][t] = 0.f;
  }
  // The keys of the block's rows: the first position's first key to the last position's last key.
  int lo_first, hi_first, lo_last, hi_last;
  const int last = pos0 + pw - 1 < sq - 1 ? pos0 + pw - 1 : sq - 1;
  row_bounds_diag(pos0 + off, p.window_left, p.window_right, sk, lo_first, hi_first);
  row_bounds_diag(last + off, p.window_left, p.window_right, sk, lo_last, hi_last);
  const int ta = lo_first / 64, tb = hi_last >= lo_first ? hi_last / 64 : ta - 1;
  auto load_tile = [&](int g, int buf) {
    auto sK = make_tensor(make_smem_ptr(sm.q[buf]), typename C::Tile{});
    auto sV = make_tensor(make_smem_ptr(sm.dout[buf]), typename C::Tile{});
    copy_tile_pair<C>(sK, sV, t, p.d, p.d_v,
        [&](int r) { return r < sk - 64 * g ? k + (k_start + 64 * g + r) * p.k_row_stride + hk * p.k_head_stride : nullptr; },
        [&](int r) { return r < sk - 64 * g ? v + (k_start + 64 * g + r) * p.v_row_stride + hk * p.v_head_stride : nullptr; },
        k);
    cp_async_commit();
  };
  __syncthreads();  // the row terms in shared memory
  float lse2[2], rr[2], dl[2], dsink_row[2] = {0.f, 0.f}, bias[2] = {0.f, 0.f};
  int lo[2], hi[2];
  bool inf_sink[2] = {false, false};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = acc_row(h, t);
    lse2[h] = sm.lse2[0][r], rr[h] = sm.r[0][r], dl[h] = sm.delta[0][r];
    row_bounds_diag(row_pos(r) + off, p.window_left, p.window_right, sk, lo[h], hi[h]);
    if (row_pos(r) >= sq) lo[h] = 1, hi[h] = 0;  // no such row: sees nothing
    if constexpr (kSinkMode == 1) {
      if (p.sinks != nullptr && row_head(r) < (hk + 1) * p.group) {
        const float s = p.sinks[row_head(r)];
        inf_sink[h] = s == INFINITY;  // its rows see v_0 only: Q and dX are 0 (lse +inf)
        bias[h] = inf_sink[h] ? 0.f : s * sink::kLog2e;
      }
    }
  }
  Tensor acc_dq = partition_fragment_C(typename C::MmaG{}, Shape<_64, Int<kHeadDim>>{});
  clear(acc_dq);
  const float c = p.scale_log2;
  if (tb >= ta) load_tile(ta, 0);
  else cp_async_wait_group<0>();  // no key: the Q / dO copies still land before the CTA ends
  for (int g = ta; g <= tb; ++g) {
    const int buf = (g - ta) & 1;
    if (g + 1 <= tb) {
      load_tile(g + 1, buf ^ 1);
      cp_async_wait_group<1>();
    } else {
      cp_async_wait_group<0>();
    }
    __syncthreads();
    auto sK = make_tensor(make_smem_ptr(sm.q[buf]), typename C::Tile{});
    auto sV = make_tensor(make_smem_ptr(sm.dout[buf]), typename C::Tile{});
    auto sKt = make_tensor(make_smem_ptr(sm.q[buf]), typename C::TileT{});
    Tensor acc_s = partition_fragment_C(typename C::MmaS{}, Shape<_64, _64>{});   // S
    Tensor acc_dp = partition_fragment_C(typename C::MmaS{}, Shape<_64, _64>{});  // dP
    wgmma_ss(typename C::MmaS{}, sQ, sK, acc_s, true, t);
    wgmma_ss(typename C::MmaS{}, sO, sV, acc_dp, true, t);
    warpgroup_commit_batch();
    warpgroup_wait<0>();
    Tensor dx_reg = make_tensor<T>(partition_shape_A(typename C::MmaG{}, Shape<_64, _64>{}));
#pragma unroll
    for (int i = 0; i < size(acc_s); ++i) {
      const int h = (i / 2) % 2, kn = 64 * g + acc_col(i, t);
      const bool visible = kn >= lo[h] && kn <= hi[h];
      const float x = acc_s(i) * c + (kSinkMode == 1 && kn == 0 ? bias[h] : 0.f);
      const float prob = visible ? ptx::exp2_approx(x - lse2[h]) : 0.f;  // 0 where lse = +inf
      const float dx = prob * (rr[h] * acc_dp(i) - dl[h]);
      if (kSinkMode == 1 && kn == 0) dsink_row[h] += dx;  // one thread holds key 0 of a row
      dx_reg(i) = T(dx);
    }
    wgmma_rs(typename C::MmaG{}, dx_reg, sKt, acc_dq, t);
    warpgroup_commit_batch();
    warpgroup_wait<0>();
    __syncthreads();  // buffer buf is read before tile g + 2 overwrites it
  }
  // ---- dq (times the scale), the key0 sink's row gradients ----
  Tg* dq = static_cast<Tg*>(p.dq);
#pragma unroll
  for (int i = 0; i < size(acc_dq); i += 2) {
    const int r = acc_row((i / 2) % 2, t), col = acc_col(i, t);
    if (!row_ok(r)) continue;
    Tg* dst = dq + (q_start + row_pos(r)) * p.dq_row_stride + row_head(r) * p.dq_head_stride;
    if (col < p.d) dst[col] = Tg(acc_dq(i) * p.scale);
    if (col + 1 < p.d) dst[col + 1] = Tg(acc_dq(i + 1) * p.scale);
  }
  if constexpr (kSinkMode == 1) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = acc_row(h, t);
      if (p.sinks != nullptr && row_ok(r) && lo[h] == 0 && hi[h] >= 0 && t % 4 == 0)  // the thread holding key 0
        p.dsink_rows[int64_t(row_head(r)) * p.rows_stride + q_start + row_pos(r)] = dsink_row[h];
    }
  }
#endif
}

}  // namespace sinkops::cuda::sm90
