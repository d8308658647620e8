// Sparse MLA forward (DESIGN.md §2.2 prefill, §2.3 FP8 paged decode) for Intel GPUs, compiled at
// run time (see common.hpp). One shared latent KV head (K == V): a work-group per (query row,
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

// Dequantized channel c of cache slot `slot` (DESIGN.md §2.3 byte layouts, read through the
// block stride: blocks may be padded).
inline float dequant_channel(const uint8_t* cache, int64_t block_stride, int block_size,
                             int64_t slot, int c, int layout_v32) {
  const int64_t block = slot / block_size, offset = slot % block_size;
  const uint8_t* blk = cache + block * block_stride;
  if (layout_v32) {
    const uint8_t* tok = blk + offset * 656;
    if (c < 512) return e4m3_to_float(tok[c]) * f32_bytes_to_float(tok + 512 + 4 * (c / 128));
    return bf16_bytes_to_float(tok + 528 + 2 * (c - 512));
  }
  const uint8_t* tok = blk + offset * 576;
  if (c < 448) {
    return e4m3_to_float(tok[c]) * e8m0_to_float(blk[block_size * 576 + offset * 8 + c / 64]);
  }
  return bf16_bytes_to_float(tok + 448 + 2 * (c - 448));
}

inline void sparse_mla_prefill_fwd_impl(
    float* kv_tile, int64_t* key_slot, const bf16* q, const bf16* kv, const int* indices,
    const int* topk_length, const float* attn_sink, bf16* out, float* max_logits, float* lse,
    int64_t q_row_stride, int64_t q_head_stride, int64_t kv_row_stride, int64_t indices_row_stride,
    int64_t out_row_stride, int64_t out_head_stride, int64_t s_kv, int h_q, int d_qk, int d_v,
    int topk, float sm_scale, int num_head_chunks) {
  auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lid = static_cast<int>(it.get_local_id(0));
  const int lane = static_cast<int>(sg.get_local_id()[0]);
  const int64_t wg = static_cast<int64_t>(it.get_group(0));
  const int64_t row = wg / num_head_chunks;
  const int head = static_cast<int>(wg % num_head_chunks) * kSubGroupsPerWorkGroup +
                   static_cast<int>(sg.get_group_id()[0]);
  const bool active = head < h_q;

  float q_reg[kMlaQkLaneElems];
  load_query_stripe(q_reg, q + row * q_row_stride + head * q_head_stride, d_qk, active, lane);
  OnlineSoftmax<kMlaVLaneElems> st;
  st.init();

  const int n = rows_to_read(topk_length, row, topk);
  for (int p0 = 0; p0 < n; p0 += kMlaKeyTile) {
    const int n_keys = sycl::min(kMlaKeyTile, n - p0);
    sycl::group_barrier(it.get_group());
    if (lid < n_keys) {
      const int64_t idx = indices[row * indices_row_stride + p0 + lid];
      key_slot[lid] = (idx >= 0 && idx < s_kv) ? idx : -1;
    }
    sycl::group_barrier(it.get_group());
    for (int e = lid; e < n_keys * d_qk; e += kWorkGroupSize) {
      const int jj = e / d_qk, c = e % d_qk;
      if (key_slot[jj] >= 0) kv_tile[jj * kMlaMaxQkDim + c] = to_float(kv[key_slot[jj] * kv_row_stride + c]);
    }
    sycl::group_barrier(it.get_group());
    if (active) attend_kv_tile(sg, q_reg, st, kv_tile, key_slot, n_keys, d_qk, d_v, sm_scale, lane);
  }
  if (!active) return;
  const float sink = attn_sink == nullptr ? -kInf : attn_sink[head];
  const float row_lse = finalize_row<bf16>(st, attn_sink != nullptr, sink,
                                           out + row * out_row_stride + head * out_head_stride, d_v, lane);
  if (lane == 0) {
    lse[row * h_q + head] = row_lse;
    max_logits[row * h_q + head] = st.m;
  }
}

inline void sparse_mla_decode_fwd_impl(
    float* kv_tile, int64_t* key_slot, const bf16* q, int64_t q_batch_stride, int64_t q_row_stride,
    int64_t q_head_stride, const uint8_t* cache, int64_t block_stride, int64_t num_blocks,
    int block_size, const int* indices, int64_t idx_batch_stride, int64_t idx_row_stride,
    const int* topk_length, int topk, const uint8_t* x_cache, int64_t x_block_stride,
    int64_t x_num_blocks, int x_block_size, const int* x_indices, int64_t x_idx_batch_stride,
    int64_t x_idx_row_stride, const int* x_topk_length, int x_topk, const float* attn_sink,
    bf16* out, float* lse, int s_q, int h_q, int d_qk, int d_v, float sm_scale, int layout_v32,
    int num_head_chunks) {
  auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lid = static_cast<int>(it.get_local_id(0));
  const int lane = static_cast<int>(sg.get_local_id()[0]);
  int64_t wg = static_cast<int64_t>(it.get_group(0));
  const int head = static_cast<int>(wg % num_head_chunks) * kSubGroupsPerWorkGroup +
                   static_cast<int>(sg.get_group_id()[0]);
  wg /= num_head_chunks;
  const int s = static_cast<int>(wg % s_q);
  const int64_t b = wg / s_q;
  const bool active = head < h_q;

  float q_reg[kMlaQkLaneElems];
  load_query_stripe(q_reg, q + b * q_batch_stride + s * q_row_stride + head * q_head_stride, d_qk,
                    active, lane);
  OnlineSoftmax<kMlaVLaneElems> st;
  st.init();

  // Main pool positions first, then the extra pool's, in one softmax.
  const int n_main = rows_to_read(topk_length, b, topk);
  const int n_extra = x_cache == nullptr ? 0 : rows_to_read(x_topk_length, b, x_topk);
  const int n = n_main + n_extra;
  const int* idx_row = indices + b * idx_batch_stride + s * idx_row_stride;
  const int* x_idx_row = x_cache == nullptr ? nullptr : x_indices + b * x_idx_batch_stride + s * x_idx_row_stride;
  // key_slot[jj] encodes the pool in bit 62 so one int64 array serves both pools.
  constexpr int64_t kExtraBit = int64_t(1) << 62;
  for (int p0 = 0; p0 < n; p0 += kMlaKeyTile) {
    const int n_keys = sycl::min(kMlaKeyTile, n - p0);
    sycl::group_barrier(it.get_group());
    if (lid < n_keys) {
      const int p = p0 + lid;
      int64_t slot;
      if (p < n_main) {
        const int64_t idx = idx_row[p];
        slot = (idx >= 0 && idx < num_blocks * block_size) ? idx : -1;
      } else {
        const int64_t idx = x_idx_row[p - n_main];
        slot = (idx >= 0 && idx < x_num_blocks * x_block_size) ? (idx | kExtraBit) : -1;
      }
      key_slot[lid] = slot;
    }
    sycl::group_barrier(it.get_group());
    for (int e = lid; e < n_keys * d_qk; e += kWorkGroupSize) {
      const int jj = e / d_qk, c = e % d_qk;
      const int64_t slot = key_slot[jj];
      if (slot < 0) continue;
      kv_tile[jj * kMlaMaxQkDim + c] =
          (slot & kExtraBit)
              ? dequant_channel(x_cache, x_block_stride, x_block_size, slot & ~kExtraBit, c, layout_v32)
              : dequant_channel(cache, block_stride, block_size, slot, c, layout_v32);
    }
    sycl::group_barrier(it.get_group());
    if (active) attend_kv_tile(sg, q_reg, st, kv_tile, key_slot, n_keys, d_qk, d_v, sm_scale, lane);
  }
  if (!active) return;
  const float sink = attn_sink == nullptr ? -kInf : attn_sink[head];
  bf16* out_row = out + ((b * s_q + s) * h_q + head) * static_cast<int64_t>(d_v);
  const float row_lse = finalize_row<bf16>(st, attn_sink != nullptr, sink, out_row, d_v, lane);
  if (lane == 0) lse[(b * h_q + head) * s_q + s] = row_lse;
}

}  // namespace sinkops_sycl

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<sinkops_sycl::kSubGroup>))
void sinkops_sparse_mla_prefill_fwd(
    const bf16* q, const bf16* kv, const int* indices, const int* topk_length,
    const float* attn_sink, bf16* out, float* max_logits, float* lse, int64_t q_row_stride,
    int64_t q_head_stride, int64_t kv_row_stride, int64_t indices_row_stride,
    int64_t out_row_stride, int64_t out_head_stride, int64_t s_kv, int h_q, int d_qk, int d_v,
    int topk, float sm_scale, int num_head_chunks) {
  static syclexp::work_group_static<float[sinkops_sycl::kMlaKeyTile * sinkops_sycl::kMlaMaxQkDim]> kv_tile;
  static syclexp::work_group_static<int64_t[sinkops_sycl::kMlaKeyTile]> key_slot;
  sinkops_sycl::sparse_mla_prefill_fwd_impl(
      &kv_tile[0], &key_slot[0], q, kv, indices, topk_length, attn_sink, out, max_logits, lse,
      q_row_stride, q_head_stride, kv_row_stride, indices_row_stride, out_row_stride,
      out_head_stride, s_kv, h_q, d_qk, d_v, topk, sm_scale, num_head_chunks);
}

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<sinkops_sycl::kSubGroup>))
void sinkops_sparse_mla_decode_fwd(
    const bf16* q, int64_t q_batch_stride, int64_t q_row_stride, int64_t q_head_stride,
    const uint8_t* cache, int64_t block_stride, int64_t num_blocks, int block_size,
    const int* indices, int64_t idx_batch_stride, int64_t idx_row_stride, const int* topk_length,
    int topk, const uint8_t* x_cache, int64_t x_block_stride, int64_t x_num_blocks,
    int x_block_size, const int* x_indices, int64_t x_idx_batch_stride, int64_t x_idx_row_stride,
    const int* x_topk_length, int x_topk, const float* attn_sink, bf16* out, float* lse, int s_q,
    int h_q, int d_qk, int d_v, float sm_scale, int layout_v32, int num_head_chunks) {
  static syclexp::work_group_static<float[sinkops_sycl::kMlaKeyTile * sinkops_sycl::kMlaMaxQkDim]> kv_tile;
  static syclexp::work_group_static<int64_t[sinkops_sycl::kMlaKeyTile]> key_slot;
  sinkops_sycl::sparse_mla_decode_fwd_impl(
      &kv_tile[0], &key_slot[0], q, q_batch_stride, q_row_stride, q_head_stride, cache,
      block_stride, num_blocks, block_size, indices, idx_batch_stride, idx_row_stride, topk_length,
      topk, x_cache, x_block_stride, x_num_blocks, x_block_size, x_indices, x_idx_batch_stride,
      x_idx_row_stride, x_topk_length, x_topk, attn_sink, out, lse, s_q, h_q, d_qk, d_v, sm_scale,
      layout_v32, num_head_chunks);
}
