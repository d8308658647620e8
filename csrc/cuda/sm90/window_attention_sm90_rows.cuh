// The rows of a warpgroup in the sm_90a window kernels (window_attention_sm90.cuh for narrow
// windows, window_attention_sm90_wide.cuh for wide ones): the shared-memory layout of Q / K / V
// rows, the gather of a warpgroup's Q rows, and its epilogue (the sink policy's finish, lse, the
// output staged through shared memory and stored as whole 16-byte chunks).
//
// A warpgroup's 64 rows are Pw consecutive query positions x Hc query heads of one kv head (GQA
// folded into M, Hc x Pw = 64, both powers of two), head-major: row r is head h_base + r / Pw,
// position rel0 + r % Pw of the block that starts at packed token row0. Rows past `live`
// positions are zero-filled and stored nowhere.
#pragma once
#include <cuda_runtime.h>

#include "../lazy_rescale.cuh"
#include "../mma_sm80.cuh"  // ptx::exp2_approx (MUFU.EX2 alone)
#include "../sink_policy.cuh"
#include "../window_bounds.cuh"
#include "kv_tile_maps.cuh"
#include "sinkops/window_attention_params.h"
#include "wgmma.cuh"
#include "window_attention_sm90_launch.cuh"  // kTileKeys

namespace sinkops::cuda::sm90 {

// K-major rows of kHeadDim 16-bit elements in the widest swizzle atom that divides them (128 B
// for 64 and 128, 64 B for 96, 32 B for 80); column atoms stacked after the rows.
template <typename T, int kHeadDim>
struct KMajorRows {
  using Atom = conditional_t<kHeadDim % 64 == 0, GMMA::Layout_K_SW128_Atom<T>,
                             conditional_t<kHeadDim % 32 == 0, GMMA::Layout_K_SW64_Atom<T>, GMMA::Layout_K_SW32_Atom<T>>>;
  template <int kRows>
  using Tiles = decltype(tile_to_shape(Atom{}, Shape<Int<kRows>, Int<kHeadDim>>{}, Step<_1, _2>{}));
  static constexpr int kAtomWidth = size<1>(Atom{});  // elements; a tile row r starts at r * kAtomWidth
  static_assert(kAtomWidth == k_major_atom_width(kHeadDim), "the TMA boxes (kv_tile_maps.cuh) write these atoms");
};

// Named barrier 1 + wg (the 128 threads of consumer wg, up to 4): its staged output is complete / read.
// Literal ids per warpgroup, so ptxas knows which barrier each bar.sync uses.
__device__ __forceinline__ void staged_bar(int wg) {
  if (wg == 0) bar_sync(1, 128);
  else if (wg == 1) bar_sync(2, 128);
  else if (wg == 2) bar_sync(3, 128);
  else bar_sync(4, 128);
}

// A warpgroup's 64 rows of a [tokens, heads, d] tensor (`base`, the given strides) into sT (64 x
// d, zero-filled past d and past `live`), by cp.async: the caller arrives on its barrier. Offsets
// inside a block are 32-bit (strides < 2^23: checked by the launchers).
template <typename Tg, int kChunks, class TS>
__device__ __forceinline__ void load_rows(TS& sT, const void* base, int64_t row_stride, int64_t head_stride, int d,
                                          int64_t row0, int h_base, int rel0, int pw, int pw_shift, int live, int t) {
  const Tg* src0 = static_cast<const Tg*>(base);
  const Tg* block = src0 + row0 * row_stride + int64_t(h_base) * head_stride;
  const int rs = int(row_stride), hs = int(head_stride);
#pragma unroll
  for (int n = 0; n < kChunks / 2; ++n) {  // 64 rows x kChunks chunks over 128 threads
    const int idx = t + 128 * n;
    const int r = idx / kChunks, col = (idx % kChunks) * 8;
    const int rel = rel0 + (r & (pw - 1));
    const bool ok = rel < live && col < d;
    const Tg* src = ok ? block + (rel * rs + (r >> pw_shift) * hs + col) : src0;  // zero-filled: reads nothing
    cp_async_16_zfill_l2(&sT(r, col), src, ok);
  }
}

// kQoTma: a kernel's compile-time choice to move whole Q rows and outputs by TMA (its Config says
// where that was measured faster); false compiles the TMA paths out (they cost registers).
// Whether a warpgroup's rows rel0.. of a block are all live: its Q then comes by TMA and its output
// leaves by TMA (a box cannot stop at the segment's end; warpgroup-uniform).
template <bool kQoTma>
__device__ __forceinline__ bool whole_rows(const QOutMaps& maps, int rel0, int pw, int live) {
  return kQoTma && maps.ok && live - rel0 >= pw;
}

// A warpgroup's whole Q rows (whole_rows) into sQ (a Tiles<64> buffer) by one thread's TMA, one box
// per column atom, whose bytes complete `bar`; then every thread's arrival on it (count 128). The
// buffer is free once the TMA store of the output staged there last has read it (store_o_rows).
// (Why TMA: the gather cost ~115 of a +-64 warp's ~1540 instructions a step: bench/NOTES.md
// "Window v12".)
template <int kHeadDim, class TS>
__device__ __forceinline__ void load_q_rows_by_tma(TS& sQ, const QOutMaps& maps, Barrier& bar, int64_t row0,
                                                   int h_base, int rel0, int t) {
  constexpr int kAtom = k_major_atom_width(kHeadDim);
  if (t == 0) {
    tma_store_wait<0>();  // (the last output staged in this buffer has been read)
    expect_tx(bar, 64 * kHeadDim * 2);
    const uint32_t dst = cast_smem_ptr_to_uint(raw_pointer_cast(sQ.data()));
    const uint64_t policy = l2_evict_first_policy();  // Q is read once
#pragma unroll
    for (int i = 0; i < kHeadDim / kAtom; ++i)
      tma_load_3d(dst + i * 64 * kAtom * 2, maps.q, bar, i * kAtom, int(row0 + rel0), h_base, policy);
  }
  cp_async_arrive(bar);
}

// The same rows gathered by every thread's cp.async (load_rows: rows past `live` zero-filled), for
// blocks that are not whole or launches without maps.
template <typename Tg, int kHeadDim, bool kQoTma, class TS>
__device__ __forceinline__ void load_q_rows_by_threads(TS& sQ, const QOutMaps& maps, Barrier& bar,
                                                       const WindowAttentionParams& p, int64_t row0, int h_base,
                                                       int rel0, int pw, int pw_shift, int live, int t, int wg) {
  if (kQoTma && maps.ok) {  // the buffer's last TMA store has read it before any thread writes it
    if (t == 0) tma_store_wait<0>();
    staged_bar(wg);
  }
  load_rows<Tg, kHeadDim / 8>(sQ, p.q, p.q_row_stride, p.q_head_stride, p.d, row0, h_base, rel0, pw, pw_shift, live,
                              t);
  cp_async_arrive(bar);
}

// Either of the two, as whole_rows says.
template <typename Tg, int kHeadDim, bool kQoTma, class TS>
__device__ __forceinline__ void load_q_rows(TS& sQ, const QOutMaps& maps, Barrier& bar, const WindowAttentionParams& p,
                                            int64_t row0, int h_base, int rel0, int pw, int pw_shift, int live, int t,
                                            int wg) {
  if (whole_rows<kQoTma>(maps, rel0, pw, live))
    load_q_rows_by_tma<kHeadDim>(sQ, maps, bar, row0, h_base, rel0, t);
  else
    load_q_rows_by_threads<Tg, kHeadDim, kQoTma>(sQ, maps, bar, p, row0, h_base, rel0, pw, pw_shift, live, t, wg);
}

// The finish of this thread's two accumulator rows (row max on raw logits, sum in log2 units,
// sinks in log2 units): each row's output scale, and its lse where asked.
template <typename Sink>
__device__ __forceinline__ void finish_rows(const WindowAttentionParams& p, const float (&row_max)[2],
                                            const float (&row_sum)[2], const float (&sink_r)[2], float c,
                                            int h_base, int64_t row0, int rel0, int pw, int pw_shift, int live, int t,
                                            float (&out_scale)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = row_sum[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int head = h_base + (acc_row(h, t) >> pw_shift);
    const float m_log2 = row_max[h] == -INFINITY ? -INFINITY : row_max[h] * c;
    if (p.lse == nullptr) {  // (uniform) no log2f: ~60 instructions a step
      out_scale[h] = Sink::out_scale(m_log2, l, sink_r[h]);
      continue;
    }
    const sink::RowFinish fin = Sink::finish(m_log2, l, sink_r[h]);
    out_scale[h] = fin.out_scale;
    const int rel = rel0 + (acc_row(h, t) & (pw - 1));
    if (p.lse != nullptr && t % 4 == 0 && rel < live) p.lse[int64_t(head) * p.lse_head_stride + row0 + rel] = fin.lse;
  }
}

// O (the fp32 accumulator of Mma, 64 x d_v) times each row's scale, staged as 16-bit rows in sT
// (the warpgroup's Q tile, free once its last QK is done) and stored: whole rows by one thread's
// TMA (the next load_q_rows into sT waits for its reads; so does the kernel's end), else as
// 16-byte chunks by every thread.
template <typename Tg, class Mma, int kHeadDim, bool kQoTma, class TO, class TS>
__device__ __forceinline__ void store_o_rows(const TO& acc_o, const float (&out_scale)[2], TS& sT,
                                             const QOutMaps& maps, const WindowAttentionParams& p, int64_t row0,
                                             int h_base, int rel0, int pw, int pw_shift, int live, int t, int wg) {
  using T = typename TS::value_type;
  constexpr int kChunks = kHeadDim / 8, kAtom = k_major_atom_width(kHeadDim);
  Tensor o16 = make_tensor_like<T>(acc_o);
#pragma unroll
  for (int i = 0; i < size(acc_o); ++i) o16(i) = T(acc_o(i) * out_scale[(i / 2) % 2]);
  store_tile_stmatrix<Mma>(o16, sT, t);
  if (whole_rows<kQoTma>(maps, rel0, pw, live)) {
    cutlass::arch::fence_view_async_shared();  // generic-proxy stores -> the TMA's reads
    staged_bar(wg);
    if (t == 0) {
      const uint32_t src = cast_smem_ptr_to_uint(raw_pointer_cast(sT.data()));
      const uint64_t policy = l2_evict_first_policy();  // nothing here reads the output again
#pragma unroll
      for (int i = 0; i < kHeadDim / kAtom; ++i)
        tma_store_3d(maps.out, src + i * 64 * kAtom * 2, i * kAtom, int(row0 + rel0), h_base, policy);
      tma_store_arrive();
    }
    return;
  }
  staged_bar(wg);
  Tg* out_block = static_cast<Tg*>(p.out) + row0 * p.out_row_stride + int64_t(h_base) * p.out_head_stride;
  const int o_rs = int(p.out_row_stride), o_hs = int(p.out_head_stride);
#pragma unroll
  for (int n = 0; n < kChunks / 2; ++n) {  // 64 rows x kChunks chunks over 128 threads
    const int idx = t + 128 * n;
    const int r = idx / kChunks, col = (idx % kChunks) * 8;
    const int rel = rel0 + (r & (pw - 1));
    if (rel < live && col < p.d_v)
      *reinterpret_cast<uint4*>(out_block + (rel * o_rs + (r >> pw_shift) * o_hs + col)) =
          *reinterpret_cast<const uint4*>(&sT(r, col));
  }
  // Every thread of the warpgroup has read its staged rows before the tile is written again.
  staged_bar(wg);
}

// ---- one block of keys of the online softmax (S in raw logits: the scale c > 0 enters the
// exponent's FFMA; element i of a thread's m64nN accumulator is row acc_row((i / 2) % 2), column
// 8 (i / 4) + 2 (t % 4) + (i & 1)). Straight-line code per element: ptxas turned per-element
// branches into BSSY/BSYNC pairs (~10 instructions an element). ----

// The key0 sink's bias on column 0 when the block starts at the segment's key 0 (key0_block), and
// the window: every row sees keys lo_r..hi_r; only the 16-key chunks that cut some row's window
// are masked (lo_last / hi_first: the warpgroup's last row's first key, its first row's last key).
template <class TS>
__device__ __forceinline__ void bias_and_mask(TS& acc_s, int kc, bool key0_block, const float (&bias_raw)[2],
                                              const int (&lo_r)[2], const int (&hi_r)[2], int lo_last, int hi_first,
                                              int t) {
  constexpr int kVals = decltype(size(acc_s))::value;
  static_assert(kVals % 8 == 0, "m64nN accumulators, N a multiple of 16");
  constexpr int kCols = kVals / 4 * 8;  // N: a thread holds 4 values of every 8 columns
  if (key0_block && t % 4 == 0) {  // column 0 (elements 0 and 2 of the quad's leader) = key 0
    acc_s(0) += bias_raw[0];
    acc_s(2) += bias_raw[1];
  }
  if (kc >= lo_last && hi_first - kc >= kCols - 1) return;  // inside every row's window
  const int c0 = 2 * (t % 4);
  const int lo[2] = {lo_r[0] - kc - c0, lo_r[1] - kc - c0}, hi[2] = {hi_r[0] - kc - c0, hi_r[1] - kc - c0};
#pragma unroll
  for (int cc = 0; cc < kCols / 16; ++cc) {
    if (kc + 16 * cc < lo_last || kc + 16 * cc + 15 > hi_first) {  // warpgroup-uniform
#pragma unroll
      for (int i = 8 * cc; i < 8 * cc + 8; ++i) {
        const int j = 8 * (i / 4) + (i & 1), h = (i / 2) % 2;
        acc_s(i) = (j >= lo[h]) & (j <= hi[h]) ? acc_s(i) : -INFINITY;
      }
    }
  }
}

// The rows' new running max (raw logits) over the block, each row's rescale alpha of everything
// before it (row_sum is rescaled here; O is the caller's, when some alpha of the warp is not 1), and
// mc = the max in log2 units for the exponent. c > 0. kLazy: the max moves only by more than
// threshold_raw = kRescaleThreshold / c (lazy_rescale.cuh; the window op has no max_logits output,
// so the stale max needs no true max beside it); else at every new max.
template <bool kLazy, class TS>
__device__ __forceinline__ void update_row_max(const TS& acc_s, float (&row_max)[2], float (&row_sum)[2], float c,
                                               float threshold_raw, float (&alpha)[2], float (&mc)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = row_max[h];
#pragma unroll
    for (int i = 2 * h; i < size(acc_s); i += 4) mx = fmaxf(mx, fmaxf(acc_s(i), acc_s(i + 1)));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    if constexpr (kLazy) mx = lazy_max(row_max[h], mx, threshold_raw);
    // m_old == m_new covers -inf == -inf (nothing seen yet) and +inf == +inf (a +inf key0 sink).
    alpha[h] = row_max[h] == mx ? 1.f : ptx::exp2_approx((row_max[h] - mx) * c);
    row_max[h] = mx;
    mc[h] = mx == -INFINITY ? 0.f : mx * c;  // never -inf - -inf
    row_sum[h] *= alpha[h];
  }
}

// The block's exponentials 2^(c s - mc) in place; a +inf key0 sink (logit +inf == row max +inf)
// gets weight 1 (exp2(inf - inf) would be NaN).
template <class TS>
__device__ __forceinline__ void exponentials(TS& acc_s, float c, const float (&mc)[2], bool key0_block, int t) {
#pragma unroll
  for (int i = 0; i < size(acc_s); ++i) acc_s(i) = ptx::exp2_approx(fmaf(acc_s(i), c, -mc[(i / 2) % 2]));
  if (key0_block && t % 4 == 0) {
    if (mc[0] == INFINITY) acc_s(0) = 1.f;
    if (mc[1] == INFINITY) acc_s(2) = 1.f;
  }
}

// ---- a CTA's run of consecutive steps (P positions each) in one segment, and the 64-key tiles
// (on a fixed grid from the segment's key 0: tile g = keys 64 g .. 64 g + 63) they read ----
template <class Params>  // the forward's or the backward's params (window_left / right)
struct StepRun {
  const Params& p;
  int pos_begin, n_steps, P, sq, sk, off;
  // Run `run` of up to `steps` steps (one when !several: a kernel built for one step per CTA) in a
  // segment of sq queries and sk keys; false when it starts past the segment (CTA-uniform).
  __device__ __forceinline__ bool start(int64_t run, int steps, int P_, int sq_, int sk_, bool several = true) {
    const int64_t begin = run * steps * P_;
    if (begin >= sq_) return false;
    P = P_, sq = sq_, sk = sk_;
    pos_begin = int(begin);
    const int steps_left = (sq - pos_begin) / P + ((sq - pos_begin) % P != 0);
    n_steps = !several ? 1 : steps_left < steps ? steps_left : steps;
    off = sk - sq;  // pos + off of a row (pos < sq) lies in (-2^31, sk): no overflow
    return true;
  }
  // Live positions of step s (tested as offsets: pos0 + P - 1 could wrap int32).
  __device__ __forceinline__ int live(int s) const {
    return sq - pos_begin - s * P < P ? sq - pos_begin - s * P : P;
  }
  // Window bounds of the row at position pos (< sq).
  __device__ __forceinline__ void bounds(int pos, int& lo, int& hi) const {
    window_attention::row_bounds_diag(pos + off, p.window_left, p.window_right, sk, lo, hi);
  }
  // Step s reads tiles ta..tb (none when tb < ta).
  __device__ __forceinline__ void step_tiles(int s, int& ta, int& tb) const {
    const int pos0 = pos_begin + s * P;
    int kmin, kmax, unused;
    bounds(pos0, kmin, unused);
    bounds(pos0 + live(s) - 1, unused, kmax);
    ta = kmax >= kmin ? kmin / kTileKeys : 0;
    tb = kmax >= kmin ? kmax / kTileKeys : -1;
  }
  // The run's tiles g_first..g_last: its first row's first key to its last row's last key. With one
  // step that is the step's tiles; with several (only when steps share tiles) the steps' ranges
  // overlap or touch, since both window bounds grow with the position, so their union is contiguous.
  __device__ __forceinline__ void run_tiles(int& g_first, int& g_last) const {
    int kmin, kmax, unused;
    bounds(pos_begin, kmin, unused);
    bounds(pos_begin + (n_steps - 1) * P + live(n_steps - 1) - 1, unused, kmax);
    g_first = kmin / kTileKeys;
    g_last = kmax >= kmin ? kmax / kTileKeys : g_first - 1;
  }
};

// ---- the K/V tiles: a stream of load indices through a ring of kStages stages, and each
// thread's share of a tile's copy ----

// The CTA's K/V tiles as one stream of load indices, the same in every thread: index i goes to
// stage i % kStages once every thread has released index i - kStages (`empty`), and may be read
// once every thread's copies of it landed (`ready`, cp.async arrivals). A thread issues only up to
// kStages past what it has itself released, so it never waits on a stage it still holds.
template <int kStages>
struct TileStream {
  using Barriers = Barrier[kStages];  // ready: count = the CTA's threads (cp.async arrivals); empty: the same
  int issued = 0;    // load indices this thread has issued
  int released = 0;  // and released
  int shift = 0;     // tile g of the current segment is load index g + shift
  // (The barrier arrays are passed to every call, not kept here: addressed from the kernel's shared
  // memory struct they stay in uniform registers with constant offsets; through a stored pointer
  // the kernels grew by ~20 % and gained registers.)

  // A segment whose first tile is g_first starts (every earlier tile was read and released).
  __device__ __forceinline__ void start_segment(int g_first) { shift = released - g_first; }
  // Issues every tile up to g_last this thread may; copy(stage, tile) copies its share of one.
  template <class Copy>
  __device__ __forceinline__ void produce(Barriers& ready, Barriers& empty, int g_last, Copy&& copy) {
#pragma unroll 1  // (one copy site per call: the kernels are sensitive to code size)
    while (issued < released + kStages && issued - shift <= g_last) {
      const int st = issued % kStages;
      empty[st].wait(((issued / kStages) & 1) ^ 1);
      copy(st, issued - shift);
      cp_async_arrive(ready[st]);
      ++issued;
    }
  }
  // Releases the tiles before tile g (after their copies landed: a stage is never refilled while an
  // older copy into it could still be in flight, even for a tile no warpgroup computed).
  template <class Copy>
  __device__ __forceinline__ void release_below(Barriers& ready, Barriers& empty, int g, int g_last, Copy&& copy) {
#pragma unroll 1
    for (; released - shift < g; ++released) {
      if (released == issued) produce(ready, empty, g_last, copy);  // (g <= g_last + 1: index `released` exists)
      ready[released % kStages].wait((released / kStages) & 1);
      empty[released % kStages].arrive();
    }
  }
  // Waits until tile g (issued) has landed; returns its stage.
  __device__ __forceinline__ int wait(Barriers& ready, int g) const {
    const int idx = g + shift;
    ready[idx % kStages].wait((idx / kStages) & 1);
    return idx % kStages;
  }
};

// A thread's share of copying kRows key rows of K and V (kHeadDim padded columns, d / d_v real
// ones) into a stage of Tiles<kRows> (TileLayout): coalesced, kChunks consecutive threads a row
// (whole 128-byte lines per warp instruction), one column per thread for every pass of
// kRowsPerPass rows, so the shared-memory offsets are computed once (off) and the global address
// moves by a constant per pass: ~7 instructions a 16-byte chunk. (Per-chunk 64-bit address math and
// swizzled shared addresses cost ~20 a chunk; one thread per row part read every 32-byte sector
// twice: bench/NOTES.md "Window v8".) Rows past the segment and columns past d are zero-filled from
// the tensor's base address: nothing is read.
template <typename Tg, int kHeadDim, int kRows, int kThreads, class TileLayout>
struct KvTileCopy {
  static constexpr int kChunks = kHeadDim / 8;
  static constexpr int kRowsPerPass = kThreads / kChunks;
  static constexpr int kPasses = (kRows + kRowsPerPass - 1) / kRowsPerPass;
  static constexpr int kTileBytes = kRows * kHeadDim * int(sizeof(Tg));  // one stage of K (or V)
  int row0, col;              // this thread's first row and its column
  bool active;                // kThreads % kChunks threads copy nothing
  bool k_ok, v_ok;            // col < d / d_v
  uint32_t off[kPasses];      // byte offsets of its chunks in a tile (every stage starts on 1 KB)

  template <typename T, class Params>  // Params: the forward's or the backward's (the same K / V fields)
  __device__ __forceinline__ KvTileCopy(const T* tile0, const Params& p, int tid) {
    row0 = tid / kChunks, col = (tid % kChunks) * 8;
    active = row0 < kRowsPerPass;
    k_ok = col < p.d, v_ok = col < p.d_v;
    auto sT = make_tensor(make_smem_ptr(tile0), TileLayout{});
#pragma unroll
    for (int n = 0; n < kPasses; ++n) {
      const int r = row0 + n * kRowsPerPass;
      off[n] = cast_smem_ptr_to_uint(&sT(r < kRows ? r : 0, col)) - cast_smem_ptr_to_uint(tile0);
    }
  }
  // Key rows kt.. of the segment (sk keys from packed row k_start) of kv head hk into the K / V
  // stages at shared addresses k_dst / v_dst.
  template <class Params>
  __device__ __forceinline__ void copy(uint32_t k_dst, uint32_t v_dst, const Params& p, int64_t k_start, int kt,
                                       int sk, int hk) const {
    const Tg* k = static_cast<const Tg*>(p.k);
    const Tg* v = static_cast<const Tg*>(p.v);
    const int64_t row = k_start + kt + row0;
    const Tg* k_src = k + row * p.k_row_stride + int64_t(hk) * p.k_head_stride + col;
    const Tg* v_src = v + row * p.v_row_stride + int64_t(hk) * p.v_head_stride + col;
    const int rows_left = sk - kt - row0;  // rows of the segment from this thread's first
#pragma unroll
    for (int n = 0; n < kPasses; ++n) {
      if (!active) break;  // (its chunks would be other threads' rows)
      if (n == kPasses - 1 && kRows % kRowsPerPass != 0 && row0 + n * kRowsPerPass >= kRows) break;
      const bool row_ok = n * kRowsPerPass < rows_left;
      cp_async_16_zfill_l2(k_dst + off[n], row_ok && k_ok ? k_src : k, row_ok && k_ok);
      cp_async_16_zfill_l2(v_dst + off[n], row_ok && v_ok ? v_src : v, row_ok && v_ok);
      k_src += kRowsPerPass * p.k_row_stride;
      v_src += kRowsPerPass * p.v_row_stride;
    }
  }
  // The whole tile (key rows kt.. of the segment): by TMA from thread 0 when the host made `maps`
  // and the tile lies inside the segment (kv_tile_maps.cuh says why only then); else this thread's
  // share (copy). Either way the caller then arrives on `ready` (cp_async_arrive).
  template <class Params>
  __device__ __forceinline__ void load(const KvTileMaps& maps, Barrier& ready, uint32_t k_dst, uint32_t v_dst,
                                       const Params& p, int64_t k_start, int kt, int sk, int hk) const {
    if (maps.ok && sk - kt >= kRows) {  // CTA-uniform
      if (threadIdx.x == 0) tma_kv_tile<kHeadDim, kRows>(maps, ready, k_dst, v_dst, int(k_start + kt), hk);
    } else {
      copy(k_dst, v_dst, p, k_start, kt, sk, hk);
    }
  }
};

}  // namespace sinkops::cuda::sm90
