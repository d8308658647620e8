// Launcher of sparse MLA decode (cuda_api.h): validation, split-k plan, main kernel, combine.
#include <string>

#include "sinkops/cuda_api.h"
#include "sparse_mla_decode.cuh"

namespace sinkops::cuda {

namespace {

using namespace sparse_mla_decode;

// Merges the split partials of one (row, head); applies the sink once. grid (h_q, b*s_q), 128 threads.
__global__ void __launch_bounds__(128)
    sparse_mla_decode_combine_kernel(const __grid_constant__ SparseMlaDecodeParams p, int num_splits) {
  const int h = blockIdx.x, row = blockIdx.y;
  const int bi = row / p.s_q, si = row % p.s_q;
  const float* ws_o = static_cast<const float*>(p.workspace);
  const float2* ws_ml = reinterpret_cast<const float2*>(ws_o + partial_o_elems(p, num_splits));
  const int64_t part0 = int64_t(row) * num_splits * p.h_q + h;  // + split * h_q

  float m_all = -INFINITY;
  for (int sp = 0; sp < num_splits; ++sp) m_all = fmaxf(m_all, ws_ml[part0 + sp * p.h_q].x);
  const bool empty = m_all == -INFINITY;
  float sum = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  const int col = threadIdx.x * 4;
  if (!empty) {
    for (int sp = 0; sp < num_splits; ++sp) {
      const float2 ml = ws_ml[part0 + sp * p.h_q];
      const float w = exp2f(ml.x - m_all);  // an empty split has max -inf: weight 0
      sum += ml.y * w;
      const float4 v = *reinterpret_cast<const float4*>(ws_o + (part0 + sp * p.h_q) * kDv + col);
      acc.x += v.x * w;
      acc.y += v.y * w;
      acc.z += v.z * w;
      acc.w += v.w * w;
    }
  }
  const float sink_term = (p.attn_sink != nullptr && !empty) ? exp2f(p.attn_sink[h] * kLog2e - m_all) : 0.f;
  const float inv = empty ? 0.f : 1.f / (sum + sink_term);
  auto* out = static_cast<__nv_bfloat16*>(p.out) + (int64_t(row) * p.h_q + h) * kDv + col;
  uint2 packed = make_uint2(pack_bf16x2(acc.x * inv, acc.y * inv), pack_bf16x2(acc.z * inv, acc.w * inv));
  *reinterpret_cast<uint2*>(out) = packed;
  if (threadIdx.x == 0) p.lse[(int64_t(bi) * p.h_q + h) * p.s_q + si] = empty ? INFINITY : (m_all + log2f(sum)) * kLn2;
}

void check_pool(const KvPool& pool, const char* name, const SparseMlaDecodeParams& p) {
  const std::string n(name);
  if (pool.block_size <= 0 || pool.num_blocks < 0) throw Error("sparse_mla_decode: " + n + " has no blocks");
  if (pool.topk < 0) throw Error("sparse_mla_decode: " + n + " topk must be >= 0");
  // cp.async copies 16 B chunks of each token: token offsets are multiples of 16 (576 and 656),
  // so the cache base and the block stride must be too.
  if (reinterpret_cast<uintptr_t>(pool.cache) % 16 != 0 || pool.block_stride % 16 != 0) {
    throw Error("sparse_mla_decode: " + n + " must be 16-byte aligned (data pointer and block stride)");
  }
  const int64_t bytes_per_token = p.layout == KvCacheLayout::kV4 ? 576 : 656;
  const int64_t min_stride = p.layout == KvCacheLayout::kV4 ? pool.block_size * 584 : pool.block_size * 656;
  if (pool.num_blocks > 1 && pool.block_stride < min_stride) {
    throw Error("sparse_mla_decode: " + n + " block stride " + std::to_string(pool.block_stride) +
                " is smaller than one block (" + std::to_string(min_stride) + " bytes)");
  }
  (void)bytes_per_token;
}

void check_params(const SparseMlaDecodeParams& p) {
  const int want_dqk = p.layout == KvCacheLayout::kV4 ? 512 : 576;
  if (p.d_qk != want_dqk) {
    throw Error("sparse_mla_decode: layout " + std::string(p.layout == KvCacheLayout::kV4 ? "v4" : "v32") +
                " needs d_qk " + std::to_string(want_dqk) + ", got " + std::to_string(p.d_qk));
  }
  if (p.d_v != kDv) throw Error("sparse_mla_decode: d_v must be 512, got " + std::to_string(p.d_v));
  if (p.h_q < 1) throw Error("sparse_mla_decode: h_q must be >= 1");
  if (int64_t(p.b) * p.s_q > 65535) throw Error("sparse_mla_decode: b * s_q must be <= 65535");
  if (reinterpret_cast<uintptr_t>(p.q) % 16 != 0 || p.q_batch_stride % 8 != 0 || p.q_row_stride % 8 != 0 ||
      p.q_head_stride % 8 != 0) {
    throw Error("sparse_mla_decode: q rows must be 16-byte aligned");
  }
  check_pool(p.pool, "kv_cache", p);
  if (p.extra.cache != nullptr) check_pool(p.extra, "extra_kv_cache", p);
}

int sm_count() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    throw Error(std::string("sparse_mla_decode: cannot query the device: ") + cudaGetErrorString(cudaGetLastError()));
  }
  return sms;
}

}  // namespace

int64_t sparse_mla_decode_workspace_bytes(const SparseMlaDecodeParams& params, int num_sms) {
  return workspace_bytes_for(params, choose_split_plan(params, num_sms).num_splits);
}

void sparse_mla_decode_fwd(const SparseMlaDecodeParams& params, void* stream) {
  check_params(params);
  if (params.b == 0 || params.s_q == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  SplitPlan plan = choose_split_plan(params, sm_count());
  if (plan.num_splits > 1 && (params.workspace == nullptr ||
                              params.workspace_bytes < workspace_bytes_for(params, plan.num_splits))) {
    throw Error("sparse_mla_decode: workspace smaller than sparse_mla_decode_workspace_bytes()");
  }
  if (params.layout == KvCacheLayout::kV4) {
    launch_sparse_mla_decode_v4(params, plan, s);
  } else {
    launch_sparse_mla_decode_v32(params, plan, s);
  }
  if (plan.num_splits > 1) {
    const dim3 grid(params.h_q, params.b * params.s_q);
    SINKOPS_LAUNCH(sparse_mla_decode_combine_kernel, grid, kDv / 4, 0, s)(params, plan.num_splits);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) throw Error(std::string("sparse_mla_decode combine launch: ") + cudaGetErrorString(err));
  }
}

}  // namespace sinkops::cuda
