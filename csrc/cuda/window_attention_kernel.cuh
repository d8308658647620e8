// Varlen window attention with sinks, forward: flash-attention-2 style kernel on mma.sync
// m16n8k16 (bf16/fp16 -> fp32) with ldmatrix and cp.async double buffering. Runs on sm_80+.
//
// Work split (why): narrow windows (MiMo: +-64) make wasted key tiles, not FLOPs, decide speed.
//  * A CTA owns kBlockM "rows" = P query positions x Hc query heads of ONE kv head (GQA folded
//    into M), so each K/V tile is read once for all Hc heads.
//  * Each warp owns 16 rows = 16 consecutive positions of one head, and computes only the
//    16-key chunks of a tile that intersect its own rows' windows (warp-uniform branches on
//    compile-time-indexed fragments, so nothing spills to local memory). Chunks that lie fully
//    inside every row's window skip the per-element mask.
//  * Key tiles start at the CTA's first visible key (not at a multiple of kBlockN), so the
//    segment's key 0, when visible at all, is column 0 of tile 0: the key0 sink is one branch
//    on `tile start == 0`; the null sink is a per-row scalar fold in the epilogue. Both come
//    from the shared sink policy (sink_policy.cuh), a template argument of the kernel.
//  * cu_seqlens values are clamped to the packed tensors (params header), so no value of them
//    can make a load or store leave q, k, v, out or lse.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernel_launch.cuh"
#include "mma_sm80.cuh"
#include "sink_policy.cuh"
#include "sinkops/window_attention_params.h"
#include "window_attention_launch.cuh"
#include "window_bounds.cuh"

namespace sinkops::cuda::window_attention {

using namespace sinkops::cuda::ptx;

// Tile shapes, in one place. kHeadDim is the padded head dim (multiple of 16) the MMA k-loop
// covers; the real d / d_v may be smaller (zero-filled channels).
// SINKOPS_WA_BLOCK_M / SINKOPS_WA_STAGES override the d <= 128 tile rows and the pipeline depth
// (for tuning runs of the C++ microbenchmark only; the library build uses the defaults).
#ifndef SINKOPS_WA_BLOCK_M
#define SINKOPS_WA_BLOCK_M 128
#endif
#ifndef SINKOPS_WA_STAGES
#define SINKOPS_WA_STAGES 3
#endif
template <int kHeadDim_>
struct Traits {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kHeadDim <= 128 ? SINKOPS_WA_BLOCK_M : 64;
  static constexpr int kBlockN = kHeadDim <= 96 ? 64 : 32;
  static constexpr int kWarps = kBlockM / 16;
  static constexpr int kThreads = kWarps * 32;
  // +8 elements (16 B) of row padding: row pitch = odd multiple of 16 B words mod 128 B, so the
  // 8 row addresses of every ldmatrix hit 8 distinct 4-bank groups (conflict-free) for any kHeadDim.
  static constexpr int kRowPitch = kHeadDim + 8;
  static constexpr bool kQInRegs = kHeadDim <= 96;
  // Register cap: 16 warps per SM (<= 128 regs/thread) to hide latency; d = 256 needs its registers.
  static constexpr int kMinBlocksPerSm = kHeadDim > 128 ? 1 : 16 / kWarps;
  static constexpr int kSmemQElems = kBlockM * kRowPitch;
  static constexpr int kSmemKvElems = kBlockN * kRowPitch;
  // K/V ring of kStages tiles: a narrow-window CTA needs only ~3 tiles, so with 3 stages nearly all
  // of its loads are in flight at once instead of paying one memory latency per tile.
  static constexpr int kStages = SINKOPS_WA_STAGES;
  static constexpr int kSmemBytes = (kSmemQElems + 2 * kStages * kSmemKvElems) * 2;  // Q + kStages x (K, V)
  static_assert(kHeadDim % 16 == 0 && kBlockN % 16 == 0, "mma k/n granularity");
};

template <typename T>
struct Mma;
template <>
struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_bf16_16816(d, a, b0, b1);
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) { return pack_bf16x2(lo, hi); }
  static __device__ __forceinline__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
};
template <>
struct Mma<__half> {
  static __device__ __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_f16_16816(d, a, b0, b1);
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) { return pack_f16x2(lo, hi); }
  static __device__ __forceinline__ __half from_float(float x) { return __float2half_rn(x); }
};

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Copies kRows rows x kHeadDim columns into smem (pitch kRowPitch). Row r comes from
// row_ptr(r) (nullptr = row absent -> zeros); columns >= ncols are zeros. `base` is any valid
// global address of the tensor, given to zero-filling copies that read nothing.
template <typename T, typename Tr, int kRows, typename RowPtr>
__device__ __forceinline__ void load_rows(T* smem, RowPtr row_ptr, const T* base, int ncols, bool vec) {
  constexpr int kChunks = Tr::kHeadDim / 8;
  if (vec) {
    for (int idx = threadIdx.x; idx < kRows * kChunks; idx += Tr::kThreads) {
      const int r = idx / kChunks, c = (idx % kChunks) * 8;
      const T* src = row_ptr(r);
      const bool pred = src != nullptr && c < ncols;
      cp_async_16(smem_addr(smem + r * Tr::kRowPitch + c), pred ? src + c : base, pred);
    }
  } else {  // unaligned rows (rare: sliced tensors): plain element loads, correct but slow
    for (int idx = threadIdx.x; idx < kRows * Tr::kHeadDim; idx += Tr::kThreads) {
      const int r = idx / Tr::kHeadDim, c = idx % Tr::kHeadDim;
      const T* src = row_ptr(r);
      smem[r * Tr::kRowPitch + c] = (src != nullptr && c < ncols) ? src[c] : Mma<T>::from_float(0.f);
    }
  }
}

// Sink: sink::Key0Sink or sink::NullSink (no sink = NullSink without a sinks tensor).
template <typename T, int kHeadDim, typename Sink>
__global__ void __launch_bounds__(Traits<kHeadDim>::kThreads, Traits<kHeadDim>::kMinBlocksPerSm)
    window_attention_fwd_kernel(const WindowAttentionParams p, const LaunchShape shape) {
  using Tr = Traits<kHeadDim>;
  constexpr int kBlockN = Tr::kBlockN;
  constexpr int kChunksN = kBlockN / 16;  // 16-key chunks per tile (unit of skipping)
  constexpr int kStepsD = kHeadDim / 16;  // mma k-steps over the head dim

  SINKOPS_DYNAMIC_SMEM(smem_raw, 16);
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK0 = sQ + Tr::kSmemQElems;  // K buffers 0..kStages-1, then V buffers
  T* sV0 = sK0 + Tr::kStages * Tr::kSmemKvElems;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t4 = lane % 4;  // mma fragment row group / column pair
  const T* q = static_cast<const T*>(p.q);
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  T* out = static_cast<T*>(p.out);
  const int P = shape.positions_per_cta;
  const int warps_per_head = P / 16;
  const int hk = blockIdx.y / shape.head_blocks_per_kv;
  const int h_base = hk * shape.group + (blockIdx.y % shape.head_blocks_per_kv) * shape.heads_per_cta;
  const int warp_head = h_base + warp / warps_per_head;  // query head of this warp's rows
  const bool vec = shape.vec_loads != 0;

  for (int b = blockIdx.z; b < p.batch; b += gridDim.z) {
    int64_t q_start, k_start;
    int sq, sk;
    segment_bounds(p.cu_seqlens_q, b, p.total_q, q_start, sq);
    segment_bounds(p.cu_seqlens_k, b, p.total_k, k_start, sk);
    const int pos0 = blockIdx.x * P;  // < max_seqlen_q: no overflow
    if (pos0 >= sq) continue;  // CTA-uniform
    const int64_t off = int64_t(sk) - sq;
    // A segment may hold up to 2^31 - 1 tokens (DESIGN.md §2.1), so pos0 + P, a + 15, kt + r, kt + 63
    // could wrap in int32: query rows are tested as offsets against sq - pos0 / sq - a, key indices are
    // taken relative to the tile start kt (int64 positions would spill 40-60 more registers).
    const int pos_last = sq - pos0 > P ? pos0 + P - 1 : sq - 1;

    // Keys any row of this CTA can see: [kmin, kmax].
    int kmin, kmax, unused;
    row_bounds(pos0, off, p.window_left, p.window_right, sk, kmin, unused);
    row_bounds(pos_last, off, p.window_left, p.window_right, sk, unused, kmax);
    const int n_tiles = kmax >= kmin ? (kmax - kmin) / kBlockN + 1 : 0;

    // This warp's rows: positions a .. a+15 of head warp_head.
    const int warp_ofs = (warp % warps_per_head) * 16;
    const bool warp_live = warp_ofs < sq - pos0;
    const int a = warp_live ? pos0 + warp_ofs : pos0;  // < sq; a dead warp computes nothing
    const int z = sq - 1 - a > 15 ? a + 15 : sq - 1;
    int lo_a, hi_a, lo_z, hi_z, lo_r[2], hi_r[2];
    row_bounds(a, off, p.window_left, p.window_right, sk, lo_a, hi_a);
    row_bounds(z, off, p.window_left, p.window_right, sk, lo_z, hi_z);
    row_bounds(int64_t(a) + g, off, p.window_left, p.window_right, sk, lo_r[0], hi_r[0]);
    row_bounds(int64_t(a) + g + 8, off, p.window_left, p.window_right, sk, lo_r[1], hi_r[1]);

    // Q tile: CTA row r -> warp r/16 -> (head, position).
    load_rows<T, Tr, Tr::kBlockM>(
        sQ,
        [&](int r) -> const T* {
          const int w = r / 16, rel = (w % warps_per_head) * 16 + r % 16;  // position pos0 + rel
          if (rel >= sq - pos0) return nullptr;
          const int h = h_base + w / warps_per_head;
          return q + (q_start + pos0 + rel) * p.q_row_stride + int64_t(h) * p.q_head_stride;
        },
        q, p.d, vec);
    auto load_kv_tile = [&](int tile, int buf) {
      const int kt = kmin + tile * kBlockN;
      auto k_row = [&](int r) -> const T* {
        return r <= kmax - kt ? k + (k_start + kt + r) * p.k_row_stride + int64_t(hk) * p.k_head_stride : nullptr;
      };
      auto v_row = [&](int r) -> const T* {
        return r <= kmax - kt ? v + (k_start + kt + r) * p.v_row_stride + int64_t(hk) * p.v_head_stride : nullptr;
      };
      load_rows<T, Tr, kBlockN>(sK0 + buf * Tr::kSmemKvElems, k_row, k, p.d, vec);
      load_rows<T, Tr, kBlockN>(sV0 + buf * Tr::kSmemKvElems, v_row, v, p.d_v, vec);
    };
    // Prologue: Q joins the first group; tiles 0..kStages-2 in flight.
#pragma unroll
    for (int st = 0; st < Tr::kStages - 1; ++st) {
      if (st < n_tiles) load_kv_tile(st, st);
      cp_async_commit();
    }

    float o[kHeadDim / 8][4];
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m_row[2] = {-INFINITY, -INFINITY}, l_row[2] = {0.f, 0.f};
    uint32_t q_frag[Tr::kQInRegs ? kStepsD : 1][4];
    // ldmatrix source rows: A operand (Q) lanes 0-15 rows 0-15 col 0, lanes 16-31 col 8.
    const T* sQ_warp = sQ + (warp * 16) * Tr::kRowPitch;
    const uint32_t q_lane_addr = smem_addr(sQ_warp + (lane % 16) * Tr::kRowPitch + (lane / 16) * 8);
    const float sink_log2 = sink::load_log2(p.sinks, warp_head);

    for (int tile = 0, buf = 0; tile < n_tiles; ++tile, buf = buf + 1 == Tr::kStages ? 0 : buf + 1) {
      cp_async_wait<Tr::kStages - 2>();  // tile `tile` (and Q) landed
      __syncthreads();  // ...for every thread; and every warp is done with tile - 1's buffer
      {
        const int next = tile + Tr::kStages - 1;  // refill the buffer tile - 1 used
        if (next < n_tiles) load_kv_tile(next, buf == 0 ? Tr::kStages - 1 : buf - 1);
        cp_async_commit();
      }
      if (Tr::kQInRegs && tile == 0) {
#pragma unroll
        for (int ks = 0; ks < kStepsD; ++ks) ldmatrix_x4(q_frag[ks], q_lane_addr + ks * 32);
      }
      const int kt = kmin + tile * kBlockN;  // <= kmax; key indices below are relative to kt (no int32 wrap)
      // Per 16-key chunk: active = intersects some row's window; full = inside every row's window.
      uint32_t active = 0, full = 0;
#pragma unroll
      for (int kc = 0; kc < kChunksN; ++kc) {
        const int c0 = kc * 16;
        if (warp_live && c0 <= hi_z - kt && c0 + 15 >= lo_a - kt) active |= 1u << kc;
        if (c0 >= lo_z - kt && c0 + 15 <= hi_a - kt) full |= 1u << kc;
      }
      if (active != 0) {
        const T* sK = sK0 + buf * Tr::kSmemKvElems;
        const T* sV = sV0 + buf * Tr::kSmemKvElems;
        // B operand (K rows = keys): lanes 0-7 keys 0-7 d 0, 8-15 keys 0-7 d 8, 16-23 keys 8-15 d 0, 24-31 keys 8-15 d 8.
        const uint32_t k_lane_addr = smem_addr(sK + ((lane / 16) * 8 + lane % 8) * Tr::kRowPitch + ((lane / 8) % 2) * 8);
        // B operand (V, transposed): lanes 0-7 keys 0-7 dv 0, 8-15 keys 8-15 dv 0, 16-31 the same at dv 8.
        const uint32_t v_lane_addr = smem_addr(sV + (lane % 16) * Tr::kRowPitch + (lane / 16) * 8);

        float s[2 * kChunksN][4];
#pragma unroll
        for (int n = 0; n < 2 * kChunksN; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < kStepsD; ++ks) {
          uint32_t qa[4];
          if constexpr (Tr::kQInRegs) {
#pragma unroll
            for (int i = 0; i < 4; ++i) qa[i] = q_frag[ks][i];
          } else {
            ldmatrix_x4(qa, q_lane_addr + ks * 32);
          }
#pragma unroll
          for (int kc = 0; kc < kChunksN; ++kc) {
            if (active & (1u << kc)) {
              uint32_t kb[4];
              ldmatrix_x4(kb, k_lane_addr + (kc * 16 * Tr::kRowPitch + ks * 16) * 2);
              Mma<T>::run(s[2 * kc], qa, kb[0], kb[1]);
              Mma<T>::run(s[2 * kc + 1], qa, kb[2], kb[3]);
            }
          }
        }

        // Logits in log2 units, key0 sink, window mask, row max.
        const bool key0_tile = Sink::kKey0Bias && kt == 0;
        float m_tile[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int kc = 0; kc < kChunksN; ++kc) {
          if (!(active & (1u << kc))) continue;
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            float* sc = s[2 * kc + half];
#pragma unroll
            for (int e = 0; e < 4; ++e) sc[e] *= shape.scale_log2;
            if (kc == 0 && half == 0 && key0_tile && t4 == 0) {  // column 0 = the segment's key 0
              sc[0] += sink_log2;
              sc[2] += sink_log2;
            }
            if (!(full & (1u << kc))) {
              const int j = kc * 16 + half * 8 + 2 * t4;  // relative to kt
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                const int jj = j + (e & 1), r = e / 2;
                if (jj < lo_r[r] - kt || jj > hi_r[r] - kt) sc[e] = -INFINITY;
              }
            }
            m_tile[0] = fmaxf(m_tile[0], fmaxf(sc[0], sc[1]));
            m_tile[1] = fmaxf(m_tile[1], fmaxf(sc[2], sc[3]));
          }
        }
        float m_sub[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const float m_new = fmaxf(m_row[r], quad_max(m_tile[r]));
          // m_old == m_new covers -inf == -inf (nothing seen yet) and +inf == +inf (key0 sink +inf).
          const float alpha = m_row[r] == m_new ? 1.f : exp2_approx(m_row[r] - m_new);
          m_row[r] = m_new;
          m_sub[r] = m_new == -INFINITY ? 0.f : m_new;  // never -inf - -inf
          l_row[r] *= alpha;
#pragma unroll
          for (int n = 0; n < kHeadDim / 8; ++n) {
            o[n][2 * r] *= alpha;
            o[n][2 * r + 1] *= alpha;
          }
        }
#pragma unroll
        for (int kc = 0; kc < kChunksN; ++kc) {
          if (!(active & (1u << kc))) continue;
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            float* sc = s[2 * kc + half];
#pragma unroll
            for (int e = 0; e < 4; ++e) sc[e] = exp2_approx(sc[e] - m_sub[e / 2]);
            if (kc == 0 && half == 0 && key0_tile && t4 == 0) {
              // key0 sink +inf: logit +inf == row max +inf -> weight 1 (exp2(inf - inf) would be NaN).
              if (m_sub[0] == INFINITY) sc[0] = 1.f;
              if (m_sub[1] == INFINITY) sc[2] = 1.f;
            }
            l_row[0] += sc[0] + sc[1];
            l_row[1] += sc[2] + sc[3];
          }
          uint32_t pa[4];
          pa[0] = Mma<T>::pack(s[2 * kc][0], s[2 * kc][1]);
          pa[1] = Mma<T>::pack(s[2 * kc][2], s[2 * kc][3]);
          pa[2] = Mma<T>::pack(s[2 * kc + 1][0], s[2 * kc + 1][1]);
          pa[3] = Mma<T>::pack(s[2 * kc + 1][2], s[2 * kc + 1][3]);
#pragma unroll
          for (int dv = 0; dv < kHeadDim / 16; ++dv) {
            uint32_t vb[4];
            ldmatrix_x4_trans(vb, v_lane_addr + (kc * 16 * Tr::kRowPitch + dv * 16) * 2);
            Mma<T>::run(o[2 * dv], pa, vb[0], vb[1]);
            Mma<T>::run(o[2 * dv + 1], pa, vb[2], vb[3]);
          }
        }
      }
    }
    // The epilogue reuses this warp's sQ rows, which other warps' threads copied in: every copy must
    // have landed CTA-wide (with n_tiles == 0 no loop barrier has ordered them yet).
    cp_async_wait<0>();
    __syncthreads();

    // Epilogue: normalize (the sink policy folds a null sink), stage this warp's 16 rows in its own sQ rows.
    float inv[2], lse[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const sink::RowFinish f = Sink::finish(m_row[r], quad_sum(l_row[r]), sink_log2);
      inv[r] = f.out_scale;
      lse[r] = f.lse;
    }
    T* sO = const_cast<T*>(sQ_warp);
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const uint32_t packed = Mma<T>::pack(o[n][2 * r] * inv[r], o[n][2 * r + 1] * inv[r]);
        *reinterpret_cast<uint32_t*>(sO + (g + 8 * r) * Tr::kRowPitch + n * 8 + 2 * t4) = packed;
      }
    }
    __syncwarp();
    if (warp_live) {
      if (t4 == 0 && p.lse != nullptr) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int row = g + 8 * r;  // position a + row
          if (row < sq - a) p.lse[int64_t(warp_head) * p.lse_head_stride + q_start + a + row] = lse[r];
        }
      }
      constexpr int kChunks = kHeadDim / 8;
      if (vec) {
#pragma unroll
        for (int idx = lane; idx < 16 * kChunks; idx += 32) {
          const int r = idx / kChunks, c = (idx % kChunks) * 8;
          if (r < sq - a && c < p.d_v) {
            T* dst = out + (q_start + a + r) * p.out_row_stride + int64_t(warp_head) * p.out_head_stride + c;
            *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(sO + r * Tr::kRowPitch + c);
          }
        }
      } else {
        for (int idx = lane; idx < 16 * kHeadDim; idx += 32) {
          const int r = idx / kHeadDim, c = idx % kHeadDim;
          if (r < sq - a && c < p.d_v)
            out[(q_start + a + r) * p.out_row_stride + int64_t(warp_head) * p.out_head_stride + c] =
                sO[r * Tr::kRowPitch + c];
        }
      }
    }
    __syncthreads();  // smem is reused by the next segment this CTA serves
  }
}

template <int kHeadDim>
TileInfo tile_info() {
  using Tr = Traits<kHeadDim>;
  return TileInfo{Tr::kBlockM, Tr::kWarps, Tr::kSmemBytes};
}

template <typename T, int kHeadDim, typename Sink>
void launch(const WindowAttentionParams& p, const LaunchShape& shape, dim3 grid, cudaStream_t stream) {
  using Tr = Traits<kHeadDim>;
  constexpr auto kernel = window_attention_fwd_kernel<T, kHeadDim, Sink>;
  reserve_dynamic_smem<kernel>(Tr::kSmemBytes, "window_attention");
  SINKOPS_LAUNCH(kernel, grid, Tr::kThreads, Tr::kSmemBytes, stream)(p, shape);
  check_launch("window_attention");
}

// The body of window_attention_hdim<D>.cu: every dtype x sink policy of head dim D.
#define SINKOPS_INSTANTIATE_WINDOW_ATTENTION(D)                                                         \
  template TileInfo tile_info<D>();                                                                     \
  template void launch<__nv_bfloat16, D, sink::Key0Sink>(const WindowAttentionParams&, const LaunchShape&, \
                                                         dim3, cudaStream_t);                           \
  template void launch<__nv_bfloat16, D, sink::NullSink>(const WindowAttentionParams&, const LaunchShape&, \
                                                         dim3, cudaStream_t);                           \
  template void launch<__half, D, sink::Key0Sink>(const WindowAttentionParams&, const LaunchShape&, dim3,  \
                                                  cudaStream_t);                                        \
  template void launch<__half, D, sink::NullSink>(const WindowAttentionParams&, const LaunchShape&, dim3,  \
                                                  cudaStream_t);

}  // namespace sinkops::cuda::window_attention
