// Sparse MLA forward (docs/DESIGN.md §2.2 prefill, §2.3 FP8 paged decode) for Intel GPUs, compiled
// at run time (see common.hpp); the kernels take the params structs of the params header by value. One shared latent KV head (K == V): a work-group per (query row,
// chunk of 16 heads) gathers a tile of the row's top-k keys into local memory once, dequantized
// to float, and every head's sub-group attends to it (one online softmax per head).
namespace sinkops_sycl {

constexpr int kMlaMaxQkDim = 576;  // V3.2 d_qk; V4 uses 512
constexpr int kMlaMaxVDim = 512;
constexpr int kMlaQkLaneElems = kMlaMaxQkDim / kSubGroup;
constexpr int kMlaVLaneElems = kMlaMaxVDim / kSubGroup;
constexpr int kMlaKeyTile = 16;

// Attends the sub-group's head to the keys staged in kv_tile (slot < 0 marks a skipped key).
inline void attend_kv_tile(sycl::sub_group sg, const float (&q)[kMlaQkLaneElems],
                           OnlineSoftmax<kMlaVLaneElems>& st, const float* kv_tile,
                           const int64_t* key_slot, int n_keys, int d_qk, int d_v, float sm_scale,
                           int lane) {
  for (int jj = 0; jj < n_keys; ++jj) {
    if (key_slot[jj] < 0) continue;  // uniform over the sub-group
    const float* row = kv_tile + jj * kMlaMaxQkDim;
    const float x = subgroup_dot(sg, q, row, d_qk, lane) * sm_scale;
    st.add(x, row, d_v, lane);  // values are the first d_v channels of the same row
  }
}

inline void load_query_stripe(float (&q_reg)[kMlaQkLaneElems], const bf16* q_row, int d_qk,
                              bool active, int lane) {
  for (int t = 0; t < kMlaQkLaneElems; ++t) {
    const int c = lane + t * kSubGroup;
    q_reg[t] = (active && c < d_qk) ? to_float(q_row[c]) : 0.0f;
  }
}

inline int rows_to_read(const int* topk_length, int64_t row, int topk) {
  if (topk_length == nullptr) return topk;
  return sycl::clamp(topk_length[row], 0, topk);
}

// Dequantized channel c of cache slot `slot` (docs/DESIGN.md §2.3 byte layouts, from
// sinkops/kv_cache_layout.h; read through the block stride: blocks may be padded).
template <sinkops::KvCacheLayout L>
inline float dequant_channel(const sinkops::KvPool& pool, int64_t slot, int c) {
  using Layout = sinkops::KvLayout<L>;
  const int64_t block = slot / pool.block_size, offset = slot % pool.block_size;
  const uint8_t* blk = pool.cache + block * pool.block_stride;
  const uint8_t* tok = blk + offset * Layout::kTokenStride;
  if (c >= Layout::kNope) return bf16_bytes_to_float(tok + Layout::kRopeOffset + 2 * (c - Layout::kNope));
  float scale;
  if constexpr (L == sinkops::KvCacheLayout::kV32) {
    scale = f32_bytes_to_float(tok + Layout::kScaleOffset + 4 * (c / Layout::kScaleGroup));
  } else {
    scale = e8m0_to_float(blk[Layout::scale_offset(pool.block_size, offset) + c / Layout::kScaleGroup]);
  }
  return e4m3_to_float(tok[c]) * scale;
}

inline void sparse_mla_prefill_fwd_impl(float* kv_tile, int64_t* key_slot, const sinkops::SparseMlaPrefillParams& p,
                                        int num_head_chunks) {
  auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lid = static_cast<int>(it.get_local_id(0));
  const int lane = static_cast<int>(sg.get_local_id()[0]);
  const int64_t wg = static_cast<int64_t>(it.get_group(0));
  const int64_t row = wg / num_head_chunks;
  const int head = static_cast<int>(wg % num_head_chunks) * kSubGroupsPerWorkGroup +
                   static_cast<int>(sg.get_group_id()[0]);
  const bool active = head < p.h_q;
  const bf16* q = static_cast<const bf16*>(p.q);
  const bf16* kv = static_cast<const bf16*>(p.kv);
  const int d_qk = p.d_qk, d_v = p.d_v;

  float q_reg[kMlaQkLaneElems];
  load_query_stripe(q_reg, q + row * p.q_row_stride + head * p.q_head_stride, d_qk, active, lane);
  OnlineSoftmax<kMlaVLaneElems> st;
  st.init();

  const int n = rows_to_read(p.topk_length, row, p.topk);
  for (int p0 = 0; p0 < n; p0 += kMlaKeyTile) {
    const int n_keys = sycl::min(kMlaKeyTile, n - p0);
    sycl::group_barrier(it.get_group());
    if (lid < n_keys) {
      const int64_t idx = p.indices[row * p.indices_row_stride + p0 + lid];
      key_slot[lid] = (idx >= 0 && idx < p.s_kv) ? idx : -1;
    }
    sycl::group_barrier(it.get_group());
    for (int e = lid; e < n_keys * d_qk; e += kWorkGroupSize) {
      const int jj = e / d_qk, c = e % d_qk;
      if (key_slot[jj] >= 0) kv_tile[jj * kMlaMaxQkDim + c] = to_float(kv[key_slot[jj] * p.kv_row_stride + c]);
    }
    sycl::group_barrier(it.get_group());
    if (active) attend_kv_tile(sg, q_reg, st, kv_tile, key_slot, n_keys, d_qk, d_v, p.sm_scale, lane);
  }
  if (!active) return;
  const float sink = p.attn_sink == nullptr ? -kInf : p.attn_sink[head];
  bf16* out = static_cast<bf16*>(p.out);
  const float row_lse = finalize_row<bf16>(st, p.attn_sink != nullptr, sink,
                                           out + row * p.out_row_stride + head * p.out_head_stride, d_v, lane);
  if (lane == 0) {
    p.lse[row * p.h_q + head] = row_lse;
    p.max_logits[row * p.h_q + head] = st.m;
  }
}

template <sinkops::KvCacheLayout L>
inline void sparse_mla_decode_fwd_impl(float* kv_tile, int64_t* key_slot, const sinkops::SparseMlaDecodeParams& p,
                                       int num_head_chunks) {
  auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lid = static_cast<int>(it.get_local_id(0));
  const int lane = static_cast<int>(sg.get_local_id()[0]);
  int64_t wg = static_cast<int64_t>(it.get_group(0));
  const int head = static_cast<int>(wg % num_head_chunks) * kSubGroupsPerWorkGroup +
                   static_cast<int>(sg.get_group_id()[0]);
  wg /= num_head_chunks;
  const int s = static_cast<int>(wg % p.s_q);
  const int64_t b = wg / p.s_q;
  const bool active = head < p.h_q;
  const int d_qk = p.d_qk, d_v = p.d_v;
  const sinkops::KvPool& main = p.pool;
  const sinkops::KvPool& extra = p.extra;
  const bool has_extra = extra.cache != nullptr;

  float q_reg[kMlaQkLaneElems];
  load_query_stripe(q_reg, static_cast<const bf16*>(p.q) + b * p.q_batch_stride + s * p.q_row_stride + head * p.q_head_stride,
                    d_qk, active, lane);
  OnlineSoftmax<kMlaVLaneElems> st;
  st.init();

  // Main pool positions first, then the extra pool's, in one softmax.
  const int n_main = rows_to_read(main.topk_length, b, main.topk);
  const int n_extra = has_extra ? rows_to_read(extra.topk_length, b, extra.topk) : 0;
  const int n = n_main + n_extra;
  const int* idx_row = main.indices + b * main.indices_batch_stride + s * main.indices_row_stride;
  const int* x_idx_row = has_extra ? extra.indices + b * extra.indices_batch_stride + s * extra.indices_row_stride : nullptr;
  // key_slot[jj] encodes the pool in bit 62 so one int64 array serves both pools.
  constexpr int64_t kExtraBit = int64_t(1) << 62;
  for (int p0 = 0; p0 < n; p0 += kMlaKeyTile) {
    const int n_keys = sycl::min(kMlaKeyTile, n - p0);
    sycl::group_barrier(it.get_group());
    if (lid < n_keys) {
      const int pos = p0 + lid;
      int64_t slot;
      if (pos < n_main) {
        const int64_t idx = idx_row[pos];
        slot = (idx >= 0 && idx < main.num_blocks * main.block_size) ? idx : -1;
      } else {
        const int64_t idx = x_idx_row[pos - n_main];
        slot = (idx >= 0 && idx < extra.num_blocks * extra.block_size) ? (idx | kExtraBit) : -1;
      }
      key_slot[lid] = slot;
    }
    sycl::group_barrier(it.get_group());
    for (int e = lid; e < n_keys * d_qk; e += kWorkGroupSize) {
      const int jj = e / d_qk, c = e % d_qk;
      const int64_t slot = key_slot[jj];
      if (slot < 0) continue;
      kv_tile[jj * kMlaMaxQkDim + c] = (slot & kExtraBit) ? dequant_channel<L>(extra, slot & ~kExtraBit, c)
                                                          : dequant_channel<L>(main, slot, c);
    }
    sycl::group_barrier(it.get_group());
    if (active) attend_kv_tile(sg, q_reg, st, kv_tile, key_slot, n_keys, d_qk, d_v, p.sm_scale, lane);
  }
  if (!active) return;
  const float sink = p.attn_sink == nullptr ? -kInf : p.attn_sink[head];
  bf16* out_row = static_cast<bf16*>(p.out) + ((b * p.s_q + s) * p.h_q + head) * static_cast<int64_t>(d_v);
  const float row_lse = finalize_row<bf16>(st, p.attn_sink != nullptr, sink, out_row, d_v, lane);
  if (lane == 0) p.lse[(b * p.h_q + head) * p.s_q + s] = row_lse;
}

}  // namespace sinkops_sycl

// Each property gets its own macro (see window_attention.hpp).
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<sinkops_sycl::kSubGroup>))
void sinkops_sparse_mla_prefill_fwd(sinkops::SparseMlaPrefillParams p, int num_head_chunks) {
  static syclexp::work_group_static<float[sinkops_sycl::kMlaKeyTile * sinkops_sycl::kMlaMaxQkDim]> kv_tile;
  static syclexp::work_group_static<int64_t[sinkops_sycl::kMlaKeyTile]> key_slot;
  sinkops_sycl::sparse_mla_prefill_fwd_impl(&kv_tile[0], &key_slot[0], p, num_head_chunks);
}

#define SINKOPS_SPARSE_MLA_DECODE_KERNEL(NAME, LAYOUT)                                                      \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                               \
  SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<sinkops_sycl::kSubGroup>))                     \
  void NAME(sinkops::SparseMlaDecodeParams p, int num_head_chunks) {                                        \
    static syclexp::work_group_static<float[sinkops_sycl::kMlaKeyTile * sinkops_sycl::kMlaMaxQkDim]> kv_tile; \
    static syclexp::work_group_static<int64_t[sinkops_sycl::kMlaKeyTile]> key_slot;                         \
    sinkops_sycl::sparse_mla_decode_fwd_impl<LAYOUT>(&kv_tile[0], &key_slot[0], p, num_head_chunks);        \
  }

SINKOPS_SPARSE_MLA_DECODE_KERNEL(sinkops_sparse_mla_decode_fwd_v4, sinkops::KvCacheLayout::kV4)
SINKOPS_SPARSE_MLA_DECODE_KERNEL(sinkops_sparse_mla_decode_fwd_v32, sinkops::KvCacheLayout::kV32)
