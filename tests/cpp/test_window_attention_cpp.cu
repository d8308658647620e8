// C++ unit test of the core without Python: window attention through the C++ API against a
// plain CPU loop (float64), key0 and null sinks, GQA, two segments (one empty). Exit 77 = skip.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "sinkops/cuda_api.h"

using sinkops::SinkMode;

static double reference_row(const std::vector<float>& q, const std::vector<float>& k,
                            const std::vector<float>& v, int i, int h, int hk_of_h, int seg_start,
                            int seg_len, int left, int right, int H, int HK, int D, float scale,
                            float sink, SinkMode mode, int dim) {
  double m = -INFINITY, l = 0, acc = 0;
  std::vector<double> logits(seg_len, -INFINITY);
  for (int j = 0; j < seg_len; ++j) {
    if ((left >= 0 && j < i - left) || (right >= 0 && j > i + right)) continue;
    double x = 0;
    for (int c = 0; c < D; ++c)
      x += double(q[((seg_start + i) * H + h) * D + c]) * k[((seg_start + j) * HK + hk_of_h) * D + c];
    x *= scale;
    if (mode == SinkMode::kKey0 && j == 0) x += sink;
    logits[j] = x;
    m = std::max(m, x);
  }
  if (m == -INFINITY) return 0.0;
  for (int j = 0; j < seg_len; ++j) {
    if (logits[j] == -INFINITY) continue;
    double p = std::exp(logits[j] - m);
    l += p;
    acc += p * v[((seg_start + j) * HK + hk_of_h) * D + dim];
  }
  if (mode == SinkMode::kNull) l += std::exp(double(sink) - m);
  return acc / l;
}

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  const int H = 4, HK = 2, D = 64, left = 5, right = 3;
  const std::vector<int> cu = {0, 37, 37, 100};
  const int T = cu.back();
  std::mt19937 rng(1234);
  std::normal_distribution<float> dist;
  std::vector<float> q(T * H * D), k(T * HK * D), v(T * HK * D), sinks = {0.3f, -0.1f, 2.0f, 0.5f};
  for (auto* vec : {&q, &k, &v})
    for (auto& x : *vec) x = __bfloat162float(__float2bfloat16(dist(rng)));
  auto to_bf16 = [](const std::vector<float>& a) {
    std::vector<__nv_bfloat16> b(a.size());
    for (size_t i = 0; i < a.size(); ++i) b[i] = __float2bfloat16(a[i]);
    return b;
  };
  auto upload = [](const void* src, size_t bytes) {
    void* p = nullptr;
    cudaMalloc(&p, bytes);
    cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice);
    return p;
  };
  auto qb = to_bf16(q), kb = to_bf16(k), vb = to_bf16(v);
  sinkops::WindowAttentionParams p;
  p.dtype = sinkops::DType::kBFloat16;
  p.q = upload(qb.data(), qb.size() * 2);
  p.k = upload(kb.data(), kb.size() * 2);
  p.v = upload(vb.data(), vb.size() * 2);
  cudaMalloc(&p.out, size_t(T) * H * D * 2);
  cudaMalloc(reinterpret_cast<void**>(&p.lse), size_t(T) * H * 4);
  p.cu_seqlens_q = static_cast<const int32_t*>(upload(cu.data(), cu.size() * 4));
  p.cu_seqlens_k = p.cu_seqlens_q;
  p.sinks = static_cast<const float*>(upload(sinks.data(), sinks.size() * 4));
  p.q_row_stride = H * D, p.q_head_stride = D;
  p.k_row_stride = p.v_row_stride = HK * D, p.k_head_stride = p.v_head_stride = D;
  p.out_row_stride = H * D, p.out_head_stride = D, p.lse_head_stride = T;
  p.total_q = p.total_k = T, p.batch = 3, p.h_q = H, p.h_k = HK, p.d = p.d_v = D;
  p.max_seqlen_q = p.max_seqlen_k = 63, p.window_left = left, p.window_right = right;
  p.scale = 1.0f / 8.0f;
  int failures = 0;
  for (SinkMode mode : {SinkMode::kKey0, SinkMode::kNull}) {
    p.sink_mode = mode;
    sinkops::cuda::window_attention_fwd(p, nullptr);
    if (cudaDeviceSynchronize() != cudaSuccess) { std::printf("launch failed\n"); return 1; }
    std::vector<__nv_bfloat16> out(size_t(T) * H * D);
    cudaMemcpy(out.data(), p.out, out.size() * 2, cudaMemcpyDeviceToHost);
    double err = 0, norm = 0;
    for (size_t s = 0; s + 1 < cu.size(); ++s)
      for (int i = 0; i < cu[s + 1] - cu[s]; ++i)
        for (int h = 0; h < H; ++h)
          for (int c = 0; c < D; ++c) {
            double ref = reference_row(q, k, v, i, h, h / (H / HK), cu[s], cu[s + 1] - cu[s], left,
                                       right, H, HK, D, p.scale, sinks[h], mode, c);
            double got = __bfloat162float(out[(size_t(cu[s] + i) * H + h) * D + c]);
            err += (got - ref) * (got - ref);
            norm += ref * ref;
          }
    double rel = std::sqrt(err / norm);
    std::printf("window_attention %s: rel L2 %.2e\n", mode == SinkMode::kKey0 ? "key0" : "null", rel);
    failures += !(rel < 5e-3);
  }
  std::printf(failures ? "FAILED\n" : "passed\n");
  return failures ? 1 : 0;
}
