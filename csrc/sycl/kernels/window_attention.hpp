// window_attention forward (docs/DESIGN.md §2.1) for Intel GPUs, compiled at run time (see
// common.hpp). One work-group per (segment, query tile, kv head, chunk of that kv head's query
// heads): the group's query heads share every K/V tile staged in local memory (GQA reuse), and
// each (query row, head) pair is one sub-group running an online softmax over the tile.
// The kernel takes sinkops::WindowAttentionParams by value (the struct of the params header).
namespace sinkops_sycl {

constexpr int kWindowMaxHeadDim = 256;                       // D and Dv
constexpr int kWindowLaneElems = kWindowMaxHeadDim / kSubGroup;
constexpr int kWindowKeyTile = 16;                           // keys per local-memory tile

// Work-group geometry chosen by the launcher (csrc/sycl/launchers.cpp).
struct WindowTiles {
  int q_tile, head_chunk, num_q_tiles, num_head_chunks;
};

template <typename T>
inline void window_attention_fwd_impl(float* k_tile, float* v_tile, const sinkops::WindowAttentionParams& p,
                                      const WindowTiles& g) {
  auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lid = static_cast<int>(it.get_local_id(0));
  const int lane = static_cast<int>(sg.get_local_id()[0]);
  const int sg_id = static_cast<int>(sg.get_group_id()[0]);
  const T* q = static_cast<const T*>(p.q);
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  T* out = static_cast<T*>(p.out);
  const int h_q = p.h_q, h_k = p.h_k, d = p.d, d_v = p.d_v;
  const int window_left = p.window_left, window_right = p.window_right;
  const int q_tile = g.q_tile, head_chunk = g.head_chunk;

  int64_t wg = static_cast<int64_t>(it.get_group(0));
  const int chunk = static_cast<int>(wg % g.num_head_chunks);
  wg /= g.num_head_chunks;
  const int kv_head = static_cast<int>(wg % h_k);
  wg /= h_k;
  const int tile = static_cast<int>(wg % g.num_q_tiles);
  const int batch = static_cast<int>(wg / g.num_q_tiles);

  int64_t q_start, k_start, sq, sk;
  segment_bounds(p.cu_seqlens_q, batch, p.total_q, q_start, sq);
  segment_bounds(p.cu_seqlens_k, batch, p.total_k, k_start, sk);
  const int64_t q0 = static_cast<int64_t>(tile) * q_tile;
  if (q0 >= sq) return;  // uniform over the work-group, so no barrier is skipped by a subset
  const int64_t q_last = sycl::min(q0 + q_tile, sq) - 1;

  const int group = h_q / h_k;
  const int row_in_tile = sg_id / head_chunk, head_in_chunk = sg_id % head_chunk;
  const int64_t qi = q0 + row_in_tile;
  const int head_in_group = chunk * head_chunk + head_in_chunk;
  const int head = kv_head * group + head_in_group;
  const bool active = row_in_tile < q_tile && qi <= q_last && head_in_group < group;

  // Keys visible to the row (flash-attention convention; -1 = unbounded side).
  const int64_t shift = sk - sq;
  const int64_t row_lo = window_left < 0 ? 0 : qi + shift - window_left;
  const int64_t row_hi = window_right < 0 ? sk - 1 : qi + shift + window_right;
  const int64_t tile_lo = sycl::max<int64_t>(0, window_left < 0 ? 0 : q0 + shift - window_left);
  const int64_t tile_hi = sycl::min<int64_t>(sk - 1, window_right < 0 ? sk - 1 : q_last + shift + window_right);

  const int sink_mode = static_cast<int>(p.sink_mode);
  const float sink = (sink_mode == kSinkNone || !active) ? 0.0f : p.sinks[head];
  float q_reg[kWindowLaneElems];
  OnlineSoftmax<kWindowLaneElems> st;
  st.init();
  for (int t = 0; t < kWindowLaneElems; ++t) {
    const int c = lane + t * kSubGroup;
    q_reg[t] = (active && c < d) ? to_float(q[(q_start + qi) * p.q_row_stride + head * p.q_head_stride + c]) : 0.0f;
  }
  bool key0_infinite = false;  // key0 sink +inf on a visible key 0: the row is exactly v_0

  for (int64_t kt = tile_lo; kt <= tile_hi; kt += kWindowKeyTile) {
    const int n_keys = static_cast<int>(sycl::min<int64_t>(kWindowKeyTile, tile_hi + 1 - kt));
    sycl::group_barrier(it.get_group());
    for (int e = lid; e < n_keys * d; e += kWorkGroupSize) {
      const int64_t j = kt + e / d;
      k_tile[(e / d) * kWindowMaxHeadDim + e % d] =
          to_float(k[(k_start + j) * p.k_row_stride + kv_head * p.k_head_stride + e % d]);
    }
    for (int e = lid; e < n_keys * d_v; e += kWorkGroupSize) {
      const int64_t j = kt + e / d_v;
      v_tile[(e / d_v) * kWindowMaxHeadDim + e % d_v] =
          to_float(v[(k_start + j) * p.v_row_stride + kv_head * p.v_head_stride + e % d_v]);
    }
    sycl::group_barrier(it.get_group());
    if (!active) continue;
    for (int jj = 0; jj < n_keys; ++jj) {
      const int64_t j = kt + jj;
      if (j < row_lo || j > row_hi) continue;  // uniform over the sub-group
      float x = subgroup_dot(sg, q_reg, k_tile + jj * kWindowMaxHeadDim, d, lane) * p.scale;
      if (sink_mode == kSinkKey0 && j == 0) {
        if (sink == -kInf) continue;  // key 0 masked
        if (sink == kInf) { key0_infinite = true; continue; }
        x += sink;
      }
      st.add(x, v_tile + jj * kWindowMaxHeadDim, d_v, lane);
    }
  }
  if (!active) return;

  T* out_row = out + (q_start + qi) * p.out_row_stride + head * p.out_head_stride;
  float row_lse;
  if (key0_infinite) {
    const T* v0 = v + k_start * p.v_row_stride + kv_head * p.v_head_stride;
    for (int c = lane; c < d_v; c += kSubGroup) out_row[c] = v0[c];
    row_lse = kInf;
  } else {
    row_lse = finalize_row<T>(st, sink_mode == kSinkNull, sink, out_row, d_v, lane);
  }
  if (lane == 0 && p.lse != nullptr) p.lse[head * p.lse_head_stride + q_start + qi] = row_lse;
}

}  // namespace sinkops_sycl

// One free-function kernel per dtype. Each property gets its own macro: a combined macro
// silently drops the kernel on the 2026.2 runtime compiler.
#define SINKOPS_WINDOW_ATTENTION_KERNEL(NAME, T)                                                  \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                     \
  SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<sinkops_sycl::kSubGroup>))           \
  void NAME(sinkops::WindowAttentionParams p, int q_tile, int head_chunk, int num_q_tiles,        \
            int num_head_chunks) {                                                                \
    static syclexp::work_group_static<                                                            \
        float[sinkops_sycl::kWindowKeyTile * sinkops_sycl::kWindowMaxHeadDim]> k_tile;            \
    static syclexp::work_group_static<                                                            \
        float[sinkops_sycl::kWindowKeyTile * sinkops_sycl::kWindowMaxHeadDim]> v_tile;            \
    sinkops_sycl::window_attention_fwd_impl<T>(&k_tile[0], &v_tile[0], p,                         \
                                               {q_tile, head_chunk, num_q_tiles, num_head_chunks}); \
  }

SINKOPS_WINDOW_ATTENTION_KERNEL(sinkops_window_attention_fwd_bf16, bf16)
SINKOPS_WINDOW_ATTENTION_KERNEL(sinkops_window_attention_fwd_fp16, sycl::half)
SINKOPS_WINDOW_ATTENTION_KERNEL(sinkops_window_attention_fwd_fp32, float)
