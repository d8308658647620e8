// Varlen window attention with sinks on Hopper (sm_90a): warpgroup MMA with the accumulators in
// registers, Q and the K/V tiles gathered with cp.async into swizzled shared memory,
// mbarrier-synchronised (docs/DESIGN.md §2.1 for the math; bench/NOTES.md "Window
// attention, sm90" for the numbers).
//
// Work split (why): at MiMo's +-64 windows the kernel is bound by memory and by the key tiles it
// computes, not by FLOPs; a CTA must read each K/V tile once for every query head that needs it.
//  * A CTA owns 128 rows = 2 consumer warpgroups x 64 rows; the rows of one warpgroup are Pw
//    consecutive query positions x Hc query heads of ONE kv head (GQA folded into M, Hc x Pw =
//    64), head-major: row r is head r / Pw, position r % Pw. Warpgroup 1's positions follow
//    warpgroup 0's, so both read the same K/V tiles, loaded once.
//  * Key tiles (64 keys) start at the CTA's first visible key, so the segment's key 0, when
//    visible at all, is column 0 of tile 0: the key0 sink is one branch on `tile start == 0`; the
//    null sink is folded once per row at the end. Both come from the shared sink policy.
//  * Per tile and warpgroup: only the 16-key chunks its rows' windows touch (N = 16..64 keys, a
//    compile-time variant each: a +-64 warpgroup computes 144 of its 3 tiles' 192 keys), S = Q K^T
//    (SS wgmma, 64 x N), the mask only where a chunk cuts some row's window, an online softmax in
//    log2 units, O += P V (RS wgmma, P from registers). Tiles no row of the warpgroup sees are
//    skipped (but still released).
//  * No producer warps: a sub-partition's 16K registers must hold 2 CTAs (one's loads and softmax
//    hide behind the other's MMAs), and ptxas allocates every warp for the kernel's launch bound,
//    whatever setmaxnreg does later (a 384-thread CTA at 2 per SM spilled 800 bytes). So both
//    warpgroups copy: each its own Q rows, all 256 threads a share of every K/V tile, kStages - 1
//    tiles ahead through ready / empty mbarriers. A narrow window's tiles (3 at +-64) are all in
//    flight at once and the two warpgroups never wait for each other.
//  * cu_seqlens values are clamped (window_bounds.cuh), rows outside the segment or past d / d_v
//    are zero-filled and never read from global memory, so no value of them leaves the tensors.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "../sink_policy.cuh"
#include "../kernel_launch.cuh"
#include "../mma_sm80.cuh"  // ptx::exp2_approx (MUFU.EX2 alone)
#include "../window_attention_launch.cuh"
#include "../window_bounds.cuh"
#include "sinkops/window_attention_params.h"
#include "wgmma.cuh"
#include "window_attention_sm90_launch.cuh"

namespace sinkops::cuda::sm90 {

template <typename T>
struct CuteElement;
template <>
struct CuteElement<__nv_bfloat16> {
  using type = cutlass::bfloat16_t;
};
template <>
struct CuteElement<__half> {
  using type = cutlass::half_t;
};

template <typename T, int kHeadDim_>
struct WindowConfig {
  static constexpr int kHeadDim = kHeadDim_;  // the padded head dim of q, k and v (d, d_v <= it)
  static constexpr int kRowsPerWg = 64;       // M of every wgmma
  // Keys per tile. SINKOPS_WA90_BLOCK_N overrides it at d <= 80 (tuning runs only).
#ifndef SINKOPS_WA90_BLOCK_N
#define SINKOPS_WA90_BLOCK_N 64
#endif
  static constexpr int kBlockN = kHeadDim <= 80 ? SINKOPS_WA90_BLOCK_N : 64;
  // Two warpgroups per CTA share every K/V tile (one tile read serves 128 rows). d <= 80: 2 CTAs
  // per SM (<= 128 registers a thread: a sub-partition's 16K registers hold 4 warps), so one CTA's
  // loads and softmax hide behind the other's MMAs; 1 warpgroup x 3 CTAs per SM measured 13 %
  // slower on MiMo (bench/NOTES.md). d 96 / 128: 1 CTA per SM (they would spill at 128).
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = 128 * kConsumers;  // no producer: the consumers load (below)
  static constexpr int kMinBlocksPerSm = kHeadDim <= 80 ? 2 : 1;
  // K/V tiles in flight: a narrow window's whole key range (192 keys) at once; with the SM to
  // itself, 5 tiles (192 KB at d 128).
  static constexpr int kStages = kHeadDim <= 80 ? 192 / kBlockN : 5;
  static constexpr int kCtaRows = 64 * kConsumers;
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  static_assert(kHeadDim % 16 == 0 && kHeadDim <= 128, "the sm90 window kernel covers head dims 16..128");

  // K-major rows of kHeadDim 16-bit elements in the widest swizzle atom that divides them
  // (128 B for 64 and 128, 64 B for 96, 32 B for 80); column atoms stacked after the rows.
  using Atom = conditional_t<kHeadDim % 64 == 0, GMMA::Layout_K_SW128_Atom<T>,
                             conditional_t<kHeadDim % 32 == 0, GMMA::Layout_K_SW64_Atom<T>, GMMA::Layout_K_SW32_Atom<T>>>;
  template <int kRows>
  using Tiles = decltype(tile_to_shape(Atom{}, Shape<Int<kRows>, Int<kHeadDim>>{}, Step<_1, _2>{}));
  static constexpr int kAtomWidth = size<1>(Atom{});  // elements; a tile row r starts at r * kAtomWidth
  // A warpgroup computes only the 16-key chunks [c, c + N) of a tile that its rows' windows touch
  // (a +-64 window's warpgroup needs 144 of the 192 keys of its 3 tiles). The views of those N
  // keys of a stage (the pointer moved by c rows, c a multiple of 16: the swizzle phase is kept):
  // K as [N keys, d] for the QK MMA, V^T as [d_v channels, N keys] for the PV MMA.
  template <int N>
  using KeyRows = decltype(composition(Tiles<kBlockN>{}, Layout<Shape<Int<N>, Int<kHeadDim>>, Stride<_1, Int<kBlockN>>>{}));
  template <int N>
  using ValueRows = decltype(composition(Tiles<kBlockN>{}, Layout<Shape<Int<kHeadDim>, Int<N>>, Stride<Int<kBlockN>, _1>>{}));
  template <int N>
  using MmaQK = decltype(make_tiled_mma(GMMA::ss_op_selector<T, T, float, Shape<_64, Int<N>, _16>>()));
  using MmaPV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<T, T, float, Shape<_64, Int<kHeadDim>, _16>, GMMA::Major::K, GMMA::Major::MN>()));

  struct Smem {
    alignas(1024) T q[kConsumers][kRowsPerWg * kHeadDim];  // per consumer [64 rows, d] Tiles<64>; then its staged O
    alignas(1024) T k[kStages][kBlockN * kHeadDim];        // [64 keys, d]   Tiles<64>
    alignas(1024) T v[kStages][kBlockN * kHeadDim];        // [64 keys, d_v] Tiles<64>
    Barrier q_ready[kConsumers];
    Barrier ready[kStages], empty[kStages];
  };
  static constexpr int kSmemBytes = sizeof(Smem);
};

// Named barrier 1 + wg (the 128 threads of consumer wg): its staged output is complete / read.
constexpr int kWindowOutStaged = 1;

// Sink: sink::Key0Sink or sink::NullSink (no sink = NullSink without a sinks tensor).
template <typename Tg, int kHeadDim, typename Sink>
__global__ void __launch_bounds__(WindowConfig<typename CuteElement<Tg>::type, kHeadDim>::kThreads,
                                  WindowConfig<typename CuteElement<Tg>::type, kHeadDim>::kMinBlocksPerSm)
    window_attention_sm90_kernel(const __grid_constant__ WindowAttentionParams p,
                                 const __grid_constant__ window_attention::LaunchShape shape) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = typename CuteElement<Tg>::type;
  using C = WindowConfig<T, kHeadDim>;
  using window_attention::row_bounds;
  constexpr int kBlockN = C::kBlockN, kStages = C::kStages, kChunks = C::kChunks, kThreads = C::kThreads;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<typename C::Smem*>(smem_raw);

  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  // Rows of a warpgroup: Hc heads x Pw positions, head-major (Hc, Pw powers of two, Hc Pw = 64).
  const int pw = shape.positions_per_cta / C::kConsumers;
  const int pw_shift = __ffs(pw) - 1;
  const int hk = blockIdx.y / shape.head_blocks_per_kv;
  const int h_base = hk * shape.group + (blockIdx.y % shape.head_blocks_per_kv) * shape.heads_per_cta;

  if (threadIdx.x == 0) {
    for (int w = 0; w < C::kConsumers; ++w) sm.q_ready[w].init(128);  // warpgroup w's cp.async arrivals
    for (int st = 0; st < kStages; ++st) {
      sm.ready[st].init(kThreads);  // every thread's cp.async arrival: each copies a share of a tile
      sm.empty[st].init(kThreads);  // every thread, after its warpgroup's MMAs of the tile
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  const Tg* q = static_cast<const Tg*>(p.q);
  const Tg* k = static_cast<const Tg*>(p.k);
  const Tg* v = static_cast<const Tg*>(p.v);
  int it = 0;        // K/V tiles this CTA has gone through (stage and barrier phase)
  int segments = 0;  // segments this CTA has served (Q barrier phase)

  for (int b = blockIdx.z; b < p.batch; b += gridDim.z) {
    int64_t q_start, k_start;
    int sq, sk;
    window_attention::segment_bounds(p.cu_seqlens_q, b, p.total_q, q_start, sq);
    window_attention::segment_bounds(p.cu_seqlens_k, b, p.total_k, k_start, sk);
    const int pos0 = blockIdx.x * shape.positions_per_cta;  // < max_seqlen_q: no overflow
    if (pos0 >= sq) continue;                                // CTA-uniform
    const int64_t off = int64_t(sk) - sq;
    // Positions are tested as offsets against sq - pos0 (pos0 + 127 could wrap int32).
    const int live = sq - pos0 < shape.positions_per_cta ? sq - pos0 : shape.positions_per_cta;
    int kmin, kmax, unused;
    row_bounds(pos0, off, p.window_left, p.window_right, sk, kmin, unused);
    row_bounds(int64_t(pos0) + live - 1, off, p.window_left, p.window_right, sk, unused, kmax);
    const int n_tiles = kmax >= kmin ? (kmax - kmin) / kBlockN + 1 : 0;
    const int it0 = it;  // this segment's tile j is the CTA's tile it0 + j

    // Offsets inside a segment are 32-bit (row strides < 2^23 elements: window_attention_sm90_takes),
    // added to 64-bit bases formed once per segment / tile: the address math is most of what a
    // narrow window's CTA executes besides the softmax.
    const Tg* q_seg = q + (q_start + pos0) * p.q_row_stride + int64_t(h_base) * p.q_head_stride;
    const int q_rs = int(p.q_row_stride), q_hs = int(p.q_head_stride);
    const int k_rs = int(p.k_row_stride), v_rs = int(p.v_row_stride);

    // ---- loads: each warpgroup copies its own Q rows; all threads share every K/V tile ----
    {
#pragma unroll
      for (int n = 0; n < kChunks / 2; ++n) {  // 64 rows x kChunks chunks over 128 threads
        const int idx = t + 128 * n;
        const int r = idx / kChunks, c = (idx % kChunks) * 8;
        const int rel = wg * pw + (r & (pw - 1));  // position pos0 + rel, head h_base + (r >> pw_shift)
        const bool ok = rel < live && c < p.d;
        const Tg* src = ok ? q_seg + (rel * q_rs + (r >> pw_shift) * q_hs + c) : q;  // zero-filled: reads nothing
        auto sQ = make_tensor(make_smem_ptr(sm.q[wg]), typename C::template Tiles<64>{});
        cp_async_16_zfill_l2(&sQ(r, c), src, ok);
      }
      cp_async_arrive(sm.q_ready[wg]);
    }
    // Tile j goes to stage (it0 + j) % kStages once both warpgroups are done with the tile that
    // stage held (the first round of waits passes). Tiles 0..kStages-2 now; tile j + kStages - 1
    // when this thread starts tile j, so the wait is on tile j - 1: a narrow window's tiles
    // (n_tiles <= kStages) never wait on the other warpgroup.
    auto issue_tile = [&](int j) {
      if (j >= n_tiles) return;
      const int g = it0 + j, st = g % kStages;
      sm.empty[st].wait(((g / kStages) & 1) ^ 1);
      const int kt = kmin + j * kBlockN;
      auto sK = make_tensor(make_smem_ptr(sm.k[st]), typename C::template Tiles<kBlockN>{});
      auto sV = make_tensor(make_smem_ptr(sm.v[st]), typename C::template Tiles<kBlockN>{});
      const Tg* k_tile = k + (k_start + kt) * p.k_row_stride + int64_t(hk) * p.k_head_stride;
      const Tg* v_tile = v + (k_start + kt) * p.v_row_stride + int64_t(hk) * p.v_head_stride;
#pragma unroll
      for (int n = 0; n < (kBlockN * kChunks + kThreads - 1) / kThreads; ++n) {
        const int idx = threadIdx.x + kThreads * n;
        if ((kBlockN * kChunks) % kThreads != 0 && idx >= kBlockN * kChunks) break;
        const int r = idx / kChunks, c = (idx % kChunks) * 8;
        const bool row_ok = r <= kmax - kt;  // a key of the CTA's range (inside the segment)
        const bool k_ok = row_ok && c < p.d, v_ok = row_ok && c < p.d_v;
        cp_async_16_zfill_l2(&sK(r, c), k_ok ? k_tile + (r * k_rs + c) : k, k_ok);
        cp_async_16_zfill_l2(&sV(r, c), v_ok ? v_tile + (r * v_rs + c) : v, v_ok);
      }
      cp_async_arrive(sm.ready[st]);
    };
#pragma unroll 1
    for (int j = 0; j < kStages - 1; ++j) issue_tile(j);

    {
      // ---- warpgroup wg: its 64 rows ----
      using MmaPV = typename C::MmaPV;
      // This thread's two accumulator rows (acc_row(0 / 1)): head and position.
      int lo_r[2], hi_r[2], head_r[2];
      float sink_r[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = acc_row(h, t);
        const int rel = wg * pw + (r & (pw - 1));
        head_r[h] = h_base + (r >> pw_shift);
        sink_r[h] = sink::load_log2(p.sinks, head_r[h]);
        if (rel < live) {
          row_bounds(int64_t(pos0) + rel, off, p.window_left, p.window_right, sk, lo_r[h], hi_r[h]);
        } else {
          lo_r[h] = 1, hi_r[h] = 0;  // no such row: sees nothing, stored nowhere
        }
      }
      // The warpgroup's first and last live positions bound the keys any of its rows sees.
      const int first = wg * pw, last = (wg + 1) * pw - 1 < live - 1 ? (wg + 1) * pw - 1 : live - 1;
      const bool wg_live = first < live;
      int lo_first = 1, hi_first = 0, lo_last = 1, hi_last = 0;
      if (wg_live) {
        row_bounds(int64_t(pos0) + first, off, p.window_left, p.window_right, sk, lo_first, hi_first);
        row_bounds(int64_t(pos0) + last, off, p.window_left, p.window_right, sk, lo_last, hi_last);
      }

      Tensor acc_o = partition_fragment_C(MmaPV{}, Shape<_64, Int<kHeadDim>>{});
      clear(acc_o);
      float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};  // log2 units; this thread's columns
      auto sQ = make_tensor(make_smem_ptr(sm.q[wg]), typename C::template Tiles<64>{});

      // One tile's N columns starting at key kc (= the tile start kt + c): S = Q K^T, the online
      // softmax, O += P V.
      auto tile_body = [&](auto n_keys, int st, int kc, int c) {
        constexpr int N = decltype(n_keys)::value;
        using MmaQK = typename C::template MmaQK<N>;
        Tensor acc_s = partition_fragment_C(MmaQK{}, Shape<_64, Int<N>>{});             // S, then P (fp32)
        Tensor p_reg = make_tensor<T>(partition_shape_A(MmaPV{}, Shape<_64, Int<N>>{}));  // P (16-bit)
        const int kt = kc;  // key indices below are relative to kc
        const bool full = kt >= lo_last && hi_first - kt >= N - 1;  // inside every row's window
        auto sK = make_tensor(make_smem_ptr(sm.k[st] + c * C::kAtomWidth), typename C::template KeyRows<N>{});
        wgmma_ss(MmaQK{}, sQ, sK, acc_s, true, t);
        warpgroup_commit_batch();
        warpgroup_wait<0>();
        // Straight-line code per element (no per-element branches: ptxas turned those into
        // BSSY/BSYNC pairs, ~10 instructions an element). Logits in log2 units first.
        const bool key0_tile = Sink::kKey0Bias && kt == 0;
        const bool quad_lead = t % 4 == 0;  // holds column 0 (elements 0 and 2)
#pragma unroll
        for (int i = 0; i < size(acc_s); ++i) acc_s(i) *= shape.scale_log2;
        if (key0_tile && quad_lead) {  // column 0 of the first tile = the segment's key 0
          acc_s(0) += sink_r[0];
          acc_s(2) += sink_r[1];
        }
        if (!full) {  // the window: element i is column 8 (i / 4) + (i & 1) past this thread's 2 (t % 4)
          const int c0 = 2 * (t % 4);
          const int lo[2] = {lo_r[0] - kt - c0, lo_r[1] - kt - c0}, hi[2] = {hi_r[0] - kt - c0, hi_r[1] - kt - c0};
#pragma unroll
          for (int i = 0; i < size(acc_s); ++i) {
            const int j = 8 * (i / 4) + (i & 1), h = (i / 2) % 2;
            acc_s(i) = (j >= lo[h]) & (j <= hi[h]) ? acc_s(i) : -INFINITY;
          }
        }
        float m_use[2], alpha[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float mx = row_max[h];
#pragma unroll
          for (int i = 2 * h; i < size(acc_s); i += 4) mx = fmaxf(mx, fmaxf(acc_s(i), acc_s(i + 1)));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          // m_old == m_new covers -inf == -inf (nothing seen yet) and +inf == +inf (a +inf key0 sink).
          alpha[h] = row_max[h] == mx ? 1.f : ptx::exp2_approx(row_max[h] - mx);
          row_max[h] = mx;
          m_use[h] = mx == -INFINITY ? 0.f : mx;  // never -inf - -inf
          row_sum[h] *= alpha[h];
        }
        // O is rescaled only when some row of the warp has a new max (warp-uniform branch).
        if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
          for (int i = 0; i < size(acc_o); ++i) acc_o(i) *= alpha[(i / 2) % 2];
        }
#pragma unroll
        for (int i = 0; i < size(acc_s); ++i) acc_s(i) = ptx::exp2_approx(acc_s(i) - m_use[(i / 2) % 2]);
        if (key0_tile && quad_lead) {
          // key0 sink +inf: logit +inf == row max +inf -> weight 1 (exp2(inf - inf) would be NaN).
          if (m_use[0] == INFINITY) acc_s(0) = 1.f;
          if (m_use[1] == INFINITY) acc_s(2) = 1.f;
        }
#pragma unroll
        for (int i = 0; i < size(acc_s); ++i) {
          row_sum[(i / 2) % 2] += acc_s(i);
          p_reg(i) = T(acc_s(i));
        }
        auto sV = make_tensor(make_smem_ptr(sm.v[st] + c * C::kAtomWidth), typename C::template ValueRows<N>{});
        wgmma_rs(MmaPV{}, p_reg, sV, acc_o, t);
        warpgroup_commit_batch();
        warpgroup_wait<0>();
      };

      sm.q_ready[wg].wait(segments & 1);
      for (int tile = 0; tile < n_tiles; ++tile, ++it) {
        issue_tile(tile + kStages - 1);
        const int st = it % kStages;
        const int kt = kmin + tile * kBlockN;  // <= kmax; key indices below are relative to kt
        // The tile intersects some row's window (warpgroup-uniform).
        const bool active = wg_live && kt <= hi_last && lo_first - kt <= kBlockN - 1;
        sm.ready[st].wait((it / kStages) & 1);
        if (active) {
          // This warpgroup's columns of the tile: [c_lo, c_lo + 16 n) covers every key its rows see.
          const int c_lo = (lo_first - kt > 0 ? lo_first - kt : 0) & ~15;
          const int c_end = hi_last - kt + 1 < kBlockN ? hi_last - kt + 1 : kBlockN;
          const int n16 = (c_end - c_lo + 15) / 16;
          auto run = [&](auto n_keys) { tile_body(n_keys, st, kt + c_lo, c_lo); };
          if (n16 == 1) run(Int<16>{});
          else if (n16 == 2) run(Int<32>{});
          else if (n16 == 3) run(Int<48>{});
          else run(Int<kBlockN>{});
        }
        sm.empty[st].arrive();
      }

      // ---- epilogue: the sink policy's finish, staged 16-bit rows, whole-row stores ----
      float out_scale[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float l = row_sum[h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const sink::RowFinish f = Sink::finish(row_max[h], l, sink_r[h]);
        out_scale[h] = f.out_scale;
        const int rel = wg * pw + (acc_row(h, t) & (pw - 1));
        if (p.lse != nullptr && t % 4 == 0 && rel < live)
          p.lse[int64_t(head_r[h]) * p.lse_head_stride + q_start + pos0 + rel] = f.lse;
      }
      // Every QK of this warpgroup is done (each ended in warpgroup_wait<0>), so its Q rows are free.
      Tensor o16 = make_tensor_like<T>(acc_o);
#pragma unroll
      for (int i = 0; i < size(acc_o); ++i) o16(i) = T(acc_o(i) * out_scale[(i / 2) % 2]);
      store_tile_stmatrix<MmaPV>(o16, sQ, t);
      if (wg == 0) bar_sync(kWindowOutStaged, 128); else bar_sync(kWindowOutStaged + 1, 128);  // ids known to ptxas
      Tg* out_seg = static_cast<Tg*>(p.out) + (q_start + pos0) * p.out_row_stride + int64_t(h_base) * p.out_head_stride;
      const int o_rs = int(p.out_row_stride), o_hs = int(p.out_head_stride);
#pragma unroll
      for (int n = 0; n < kChunks / 2; ++n) {  // 64 rows x kChunks chunks over 128 threads
        const int idx = t + 128 * n;
        const int r = idx / kChunks, c = (idx % kChunks) * 8;
        const int rel = wg * pw + (r & (pw - 1));
        if (rel < live && c < p.d_v)
          *reinterpret_cast<uint4*>(out_seg + (rel * o_rs + (r >> pw_shift) * o_hs + c)) =
              *reinterpret_cast<const uint4*>(&sQ(r, c));
      }
      // Every thread of the warpgroup has read its staged rows before the next segment's Q lands there.
      if (wg == 0) bar_sync(kWindowOutStaged, 128); else bar_sync(kWindowOutStaged + 1, 128);
    }
    ++segments;
  }
  cp_async_wait_all();
#endif
}

template <int kHeadDim>
int window_attention_smem_bytes() {
  return WindowConfig<cutlass::bfloat16_t, kHeadDim>::kSmemBytes;
}

template <int kHeadDim>
int window_attention_cta_rows() {
  return WindowConfig<cutlass::bfloat16_t, kHeadDim>::kCtaRows;
}

template <typename Tg, int kHeadDim, typename Sink>
void launch_window_attention(const WindowAttentionParams& p, const window_attention::LaunchShape& shape, dim3 grid,
                             cudaStream_t stream) {
  using C = WindowConfig<typename CuteElement<Tg>::type, kHeadDim>;
  constexpr auto kernel = window_attention_sm90_kernel<Tg, kHeadDim, Sink>;
  reserve_dynamic_smem<kernel>(C::kSmemBytes, "window_attention (sm90)");
  kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(p, shape);
  check_launch("window_attention (sm90)");
}

}  // namespace sinkops::cuda::sm90
