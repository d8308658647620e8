// Sparse MLA decode over the paged FP8 KV caches (DESIGN.md §2.3), with the null-logit sink.
//
// One CTA = one (batch, s_q) row x a block of 64 query heads x a contiguous chunk ("split") of
// the row's key list (main pool's top-k, then the extra pool's top-k, one softmax over both).
// Per tile of 32 keys:
//   1. cp.async gathers the raw FP8 token bytes (+ v4 scale bytes) of the *next* tile into smem,
//   2. the current raw tile is dequantized into a bf16 smem tile [32 keys][d_qk] (K == V),
//   3. 8 warps: warp w owns heads 16*(w%4).. and key half (w/4) for S = Q K^T (mma.sync
//      m16n8k16 bf16), the two key halves exchange their row maxima through smem, write
//      P (bf16) to smem, and then warp w accumulates O[16 heads][256 value columns of half w/4]
//      += P V over all 32 keys. Splitting O by columns keeps 128 fp32 accumulators per thread.
// With one split the kernel finalizes in place (sink, lse); with several it writes unnormalized
// partials (o, max, sum) to the workspace and sparse_mla_decode_combine_kernel merges them and
// applies the sink exactly once (both through sink_policy.cuh). The byte layouts come from
// sinkops/kv_cache_layout.h.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "fp8_dequant.cuh"
#include "kernel_launch.cuh"
#include "mma_sm80.cuh"
#include "sink_policy.cuh"
#include "sinkops/kv_cache_layout.h"
#include "sinkops/sparse_mla_params.h"
#include "sparse_mla_decode_plan.cuh"

namespace sinkops::cuda::sparse_mla_decode {

using namespace sinkops::cuda::ptx;

constexpr int kHeadsPerCta = 64;
constexpr int kKeysPerTile = 32;
constexpr int kThreads = 256;  // 8 warps: 4 head groups of 16 x 2 key halves / value halves
constexpr int kDv = 512;
constexpr int kDvPerWarp = kDv / 2;
static_assert(kDv == kPartialDv, "the workspace describes this kernel");
// One raw key slot: a v32 token, or a v4 token and its scale bytes; 16 B aligned.
constexpr int kRawBytesPerKey = 672;
static_assert(kRawBytesPerKey >= KvLayout<KvCacheLayout::kV32>::kTokenStride &&
              kRawBytesPerKey >= KvLayout<KvCacheLayout::kV4>::kTokenStride + KvLayout<KvCacheLayout::kV4>::kScaleBytes,
              "raw slot too small");
// Row padding (bf16 elements) so that consecutive smem rows start 16 B apart modulo 128 B:
// the 8 row addresses of every ldmatrix hit distinct banks.
constexpr int kSmemPad = 8;

template <int D>
struct SharedStorage {
  __nv_bfloat16 q[kHeadsPerCta][D + kSmemPad];
  __nv_bfloat16 kv[kKeysPerTile][D + kSmemPad];  // dequantized tile; values = columns [0, 512)
  alignas(16) uint8_t raw[2][kKeysPerTile][kRawBytesPerKey];
  __nv_bfloat16 p[kHeadsPerCta][kKeysPerTile + kSmemPad];
  float row_max_part[2][kHeadsPerCta];
  float row_sum_part[2][kHeadsPerCta];
  int key_valid[2][kKeysPerTile];
};

// Issues the cp.async copies of the tile whose first key position is `pos0` into raw[buf] and
// records which of its keys are valid. Thread layout: 8 threads per key.
template <KvCacheLayout L>
__device__ __forceinline__ void issue_tile_loads(const SparseMlaDecodeParams& p, SharedStorage<KvLayout<L>::kDqk>& s,
                                                 int buf, int pos0, int split_end, int bi, int si) {
  using T = KvLayout<L>;
  const int key = threadIdx.x / 8, j = threadIdx.x % 8;
  const int pos = pos0 + key;
  const uint8_t* token = nullptr;
  const uint8_t* scales = nullptr;
  if (pos < split_end) {
    const bool in_main = pos < p.pool.topk;
    const KvPool& pool = in_main ? p.pool : p.extra;
    const int i = in_main ? pos : pos - p.pool.topk;
    const int len = pool.topk_length != nullptr ? pool.topk_length[bi] : pool.topk;
    if (i < len) {
      const int idx = pool.indices[bi * pool.indices_batch_stride + si * pool.indices_row_stride + i];
      if (idx >= 0 && int64_t(idx) < pool.num_blocks * pool.block_size) {
        const int64_t block = idx / pool.block_size, off = idx % pool.block_size;
        const uint8_t* base = pool.cache + block * pool.block_stride;
        token = base + off * T::kTokenStride;
        if constexpr (L == KvCacheLayout::kV4) scales = base + T::scale_offset(pool.block_size, off);
      }
    }
  }
  if (j == 0) s.key_valid[buf][key] = token != nullptr;
  if (token == nullptr) return;
  uint8_t* dst = s.raw[buf][key];
  for (int c = j; c < T::kTokenStride / 16; c += 8) cp_async_16(dst + c * 16, token + c * 16);
  if constexpr (L == KvCacheLayout::kV4) {
    static_assert(T::kScaleBytes == 8, "one 8-byte copy of the scales");
    if (j == 7) cp_async_8(dst + T::kTokenStride, scales);  // the scales land right after the token
  }
}

// raw[buf] -> kv (bf16). Invalid keys become zero rows: their P is 0, and 0 * garbage could be NaN.
template <KvCacheLayout L>
__device__ __forceinline__ void dequantize_tile(SharedStorage<KvLayout<L>::kDqk>& s, int buf) {
  using T = KvLayout<L>;
  const int key = threadIdx.x / 8, j = threadIdx.x % 8;
  __nv_bfloat16* dst = s.kv[key];
  const uint8_t* src = s.raw[buf][key];
  if (!s.key_valid[buf][key]) {
    for (int c = j; c < T::kDqk / 8; c += 8) *reinterpret_cast<uint4*>(dst + c * 8) = make_uint4(0, 0, 0, 0);
    return;
  }
  for (int c = j; c < T::kNope / 8; c += 8) {
    float scale;
    if constexpr (L == KvCacheLayout::kV32) {
      scale = reinterpret_cast<const float*>(src + T::kScaleOffset)[c * 8 / T::kScaleGroup];
    } else {
      scale = e8m0_to_float(src[T::kTokenStride + c * 8 / T::kScaleGroup]);
    }
    const uint2 raw8 = *reinterpret_cast<const uint2*>(src + c * 8);
    *reinterpret_cast<uint4*>(dst + c * 8) = dequant_8_e4m3(raw8, scale);
  }
  // 64 bf16 rope values = 8 x 16 B, one chunk per thread of the key.
  static_assert(T::kRope == 64, "one 16-byte chunk of rope per thread of the key");
  *reinterpret_cast<uint4*>(dst + T::kNope + j * 8) = *reinterpret_cast<const uint4*>(src + T::kRopeOffset + j * 16);
}

// grid: (head blocks, splits, b * s_q); block: kThreads; dynamic smem: SharedStorage<D>.
template <KvCacheLayout L>
__global__ void __launch_bounds__(kThreads, 1)
    sparse_mla_decode_kernel(const __grid_constant__ SparseMlaDecodeParams p) {
  using T = KvLayout<L>;
  constexpr int D = T::kDqk;
  SINKOPS_DYNAMIC_SMEM(smem_bytes, 16);
  auto& s = *reinterpret_cast<SharedStorage<D>*>(smem_bytes);

  const int head0 = blockIdx.x * kHeadsPerCta;
  const int split = blockIdx.y;
  const int row = blockIdx.z;
  allow_dependents();  // the combine (a programmatic dependent) may be scheduled now; it waits for us
  const int bi = row / p.s_q, si = row % p.s_q;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int hg = warp % 4;  // head group: heads head0 + 16*hg ..
  const int kh = warp / 4;  // key half for S, value-column half for O
  const int g = lane / 4, tq = lane % 4;

  const int num_splits = p.num_splits, tiles_per_split = p.tiles_per_split;
  const int total = total_topk(p);
  const int split_begin = split * tiles_per_split * kKeysPerTile;
  int split_end = split_begin + tiles_per_split * kKeysPerTile;
  split_end = split_end < total ? split_end : total;
  const int num_tiles = split_end > split_begin ? (split_end - split_begin + kKeysPerTile - 1) / kKeysPerTile : 0;

  // Q rows of this head block (zero rows past h_q), in the same cp.async group as tile 0.
  {
    const auto* q = static_cast<const __nv_bfloat16*>(p.q) + bi * p.q_batch_stride + si * p.q_row_stride;
    constexpr int kChunksPerRow = D / 8;
    for (int c = threadIdx.x; c < kHeadsPerCta * kChunksPerRow; c += kThreads) {
      const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
      const int h = head0 + r;
      if (h < p.h_q) {
        cp_async_16(&s.q[r][col], q + h * p.q_head_stride + col);
      } else {
        *reinterpret_cast<uint4*>(&s.q[r][col]) = make_uint4(0, 0, 0, 0);
      }
    }
  }
  if (num_tiles > 0) issue_tile_loads<L>(p, s, 0, split_begin, split_end, bi, si);
  cp_async_commit();

  float o[kDvPerWarp / 8][4];
#pragma unroll
  for (int n = 0; n < kDvPerWarp / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY};  // running max of log2-scaled logits, rows g and g + 8
  float l[2] = {0.f, 0.f};              // running sum over this warp's key half only
  const float scale_log2 = p.sm_scale * sink::kLog2e;
  const int hrow[2] = {hg * 16 + g, hg * 16 + g + 8};

  for (int t = 0; t < num_tiles; ++t) {
    const int buf = t & 1;
    cp_async_wait_all();
    // Also orders: previous tile's P V reads of s.kv before this tile's dequantize writes.
    __syncthreads();
    if (t + 1 < num_tiles) issue_tile_loads<L>(p, s, buf ^ 1, split_begin + (t + 1) * kKeysPerTile, split_end, bi, si);
    cp_async_commit();
    dequantize_tile<L>(s, buf);
    __syncthreads();

    // S = Q K^T: 16 heads x 16 keys (two n-tiles of 8).
    float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll 4
    for (int k0 = 0; k0 < D; k0 += 16) {
      uint32_t a[4], b[4];
      ldmatrix_x4(a, &s.q[hg * 16 + lane % 16][k0 + (lane / 16) * 8]);
      ldmatrix_x4(b, &s.kv[kh * 16 + (lane / 16) * 8 + lane % 8][k0 + ((lane / 8) % 2) * 8]);
      mma_bf16_16816(acc[0], a, b[0], b[1]);
      mma_bf16_16816(acc[1], a, b[2], b[3]);
    }
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = kh * 16 + nt * 8 + 2 * tq + (e % 2);
        acc[nt][e] = s.key_valid[buf][key] ? acc[nt][e] * scale_log2 : -INFINITY;
        mx[e / 2] = fmaxf(mx[e / 2], acc[nt][e]);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      if (tq == 0) s.row_max_part[kh][hrow[r]] = mx[r];
    }
    __syncthreads();

    // Both key halves read the same two partial maxima, so the warp pair keeps identical m.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float m_new = fmaxf(m[r], fmaxf(s.row_max_part[0][hrow[r]], s.row_max_part[1][hrow[r]]));
      const float m_use = m_new == -INFINITY ? 0.f : m_new;  // all masked so far: avoid inf - inf
      const float alpha = exp2f(m[r] - m_use);
      m[r] = m_new;
      l[r] *= alpha;
#pragma unroll
      for (int n = 0; n < kDvPerWarp / 8; ++n) {
        o[n][2 * r] *= alpha;
        o[n][2 * r + 1] *= alpha;
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const float p0 = exp2f(acc[nt][2 * r] - m_use), p1 = exp2f(acc[nt][2 * r + 1] - m_use);
        l[r] += p0 + p1;
        *reinterpret_cast<uint32_t*>(&s.p[hrow[r]][kh * 16 + nt * 8 + 2 * tq]) = pack_bf16x2(p0, p1);
      }
    }
    __syncthreads();

    // O[16 heads][256 columns of half kh] += P[16 heads][32 keys] V[32 keys][...].
#pragma unroll
    for (int k0 = 0; k0 < kKeysPerTile; k0 += 16) {
      uint32_t a[4];
      ldmatrix_x4(a, &s.p[hg * 16 + lane % 16][k0 + (lane / 16) * 8]);
#pragma unroll
      for (int n = 0; n < kDvPerWarp; n += 16) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, &s.kv[k0 + lane % 8 + ((lane / 8) % 2) * 8][kh * kDvPerWarp + n + (lane / 16) * 8]);
        mma_bf16_16816(o[n / 8], a, b[0], b[1]);
        mma_bf16_16816(o[n / 8 + 1], a, b[2], b[3]);
      }
    }
  }

  cp_async_wait_all();  // with no tile, the Q copies are still in flight

  // Row sums: quad, then the two key halves in a fixed order (deterministic).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    if (tq == 0) s.row_sum_part[kh][hrow[r]] = l[r];
  }
  __syncthreads();

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int h = head0 + hrow[r];
    if (h >= p.h_q) continue;
    const float sum = s.row_sum_part[0][hrow[r]] + s.row_sum_part[1][hrow[r]];
    const int col0 = kh * kDvPerWarp + 2 * tq;
    if (num_splits == 1) {
      const sink::RowFinish f = sink::NullSink::finish(m[r], sum, sink::load_log2(p.attn_sink, h));
      auto* out = static_cast<__nv_bfloat16*>(p.out) + ((int64_t(row) * p.h_q) + h) * kDv;
#pragma unroll
      for (int n = 0; n < kDvPerWarp / 8; ++n) {
        *reinterpret_cast<uint32_t*>(out + col0 + n * 8) =
            pack_bf16x2(o[n][2 * r] * f.out_scale, o[n][2 * r + 1] * f.out_scale);
      }
      if (kh == 0 && tq == 0) p.lse[(int64_t(bi) * p.h_q + h) * p.s_q + si] = f.lse;
    } else {
      const int64_t part = (int64_t(row) * num_splits + split) * p.h_q + h;
      float* ws_o = static_cast<float*>(p.workspace) + part * kDv;
#pragma unroll
      for (int n = 0; n < kDvPerWarp / 8; ++n) {
        *reinterpret_cast<float2*>(ws_o + col0 + n * 8) = make_float2(o[n][2 * r], o[n][2 * r + 1]);
      }
      if (kh == 0 && tq == 0) {
        float2* ws_ml = reinterpret_cast<float2*>(static_cast<float*>(p.workspace) + partial_o_elems(p, num_splits));
        ws_ml[part] = make_float2(m[r], sum);
      }
    }
  }
}

// Per-layout launch of the main kernel, instantiated in sparse_mla_decode_v4.cu / _v32.cu so the
// two compile in parallel.
template <KvCacheLayout L>
void launch_decode_kernel(const SparseMlaDecodeParams& p, cudaStream_t stream) {
  constexpr int kSmem = int(sizeof(SharedStorage<KvLayout<L>::kDqk>));
  constexpr auto kernel = sparse_mla_decode_kernel<L>;
  reserve_dynamic_smem<kernel>(kSmem, "sparse_mla_decode");
  const dim3 grid((p.h_q + kHeadsPerCta - 1) / kHeadsPerCta, p.num_splits, p.b * p.s_q);
  SINKOPS_LAUNCH(kernel, grid, kThreads, kSmem, stream)(p);
  check_launch("sparse_mla_decode");
}
extern template void launch_decode_kernel<KvCacheLayout::kV4>(const SparseMlaDecodeParams&, cudaStream_t);
extern template void launch_decode_kernel<KvCacheLayout::kV32>(const SparseMlaDecodeParams&, cudaStream_t);

}  // namespace sinkops::cuda::sparse_mla_decode
