// Microbenchmark of the CUDA sparse MLA prefill kernel (csrc/cuda/sparse_mla_prefill*.cu) on
// random data: 4096 queries, 32768 keys, random top-k indices, null sink in DeepSeek-V4's range.
// Build (from the repo root):
//   nvcc -std=c++17 -O3 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a \
//        -Icsrc/include -Icsrc/cuda bench/cpp/bench_sparse_mla_prefill.cu \
//        csrc/cuda/sparse_mla_prefill*.cu -o /tmp/bench_sparse_mla_prefill
// FLOPs = 2 * Sq * Hq * topk * (d_qk + d_v) (FlashMLA's count; masked heads are not counted).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_common.cuh"
#include "sinkops/cuda_api.h"


__global__ void fill_indices(int32_t* p, int64_t n, int32_t s_kv, uint64_t seed) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    p[i] = static_cast<int32_t>(hash_u32(i + seed * 7919) % s_kv);
}

struct Case { const char* name; int h_q, d_qk, topk; };

int main() {
  const int64_t s_q = 4096, s_kv = 32768;
  const int d_v = 512;
  const Case cases[] = {
      {"V4-Pro   h128 d512 topk1152", 128, 512, 1152},
      {"V4-Flash h64  d512 topk640 ", 64, 512, 640},
      {"V3.2     h128 d576 topk2048", 128, 576, 2048},
      {"TP8      h16  d512 topk640 ", 16, 512, 640},
      {"TP8      h8   d512 topk640 ", 8, 512, 640},
  };
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  std::printf("%-30s %10s %10s\n", "case (Sq 4096, Skv 32768)", "us", "TFLOP/s");
  for (const Case& c : cases) {
    __nv_bfloat16 *q, *kv, *out;
    int32_t* idx;
    float *sink, *lse, *max_logits;
    const int64_t nq = s_q * c.h_q * c.d_qk, nkv = s_kv * c.d_qk, nidx = s_q * c.topk;
    CHECK_CUDA(cudaMalloc(&q, nq * 2));
    CHECK_CUDA(cudaMalloc(&kv, nkv * 2));
    CHECK_CUDA(cudaMalloc(&out, s_q * c.h_q * d_v * 2));
    CHECK_CUDA(cudaMalloc(&idx, nidx * 4));
    CHECK_CUDA(cudaMalloc(&sink, c.h_q * 4));
    CHECK_CUDA(cudaMalloc(&lse, s_q * c.h_q * 4));
    CHECK_CUDA(cudaMalloc(&max_logits, s_q * c.h_q * 4));
    fill_bf16<<<1024, 256, 0, stream>>>(q, nq, 1, 1.f);
    fill_bf16<<<1024, 256, 0, stream>>>(kv, nkv, 2, 1.f);
    fill_indices<<<1024, 256, 0, stream>>>(idx, nidx, static_cast<int32_t>(s_kv), 3);
    std::vector<float> h_sink(c.h_q);
    for (int h = 0; h < c.h_q; ++h) h_sink[h] = -2.2f + 4.7f * h / c.h_q;  // V4 checkpoint range
    CHECK_CUDA(cudaMemcpy(sink, h_sink.data(), c.h_q * 4, cudaMemcpyHostToDevice));

    sinkops::SparseMlaPrefillParams p;
    p.q = q; p.kv = kv; p.indices = idx; p.attn_sink = sink;
    p.out = out; p.lse = lse; p.max_logits = max_logits;
    p.q_row_stride = int64_t(c.h_q) * c.d_qk; p.q_head_stride = c.d_qk;
    p.kv_row_stride = c.d_qk; p.indices_row_stride = c.topk;
    p.out_row_stride = int64_t(c.h_q) * d_v; p.out_head_stride = d_v;
    p.s_q = s_q; p.s_kv = s_kv; p.h_q = c.h_q; p.d_qk = c.d_qk; p.d_v = d_v; p.topk = c.topk;
    p.sm_scale = 1.f / 24.f;

    for (int i = 0; i < 3; ++i) sinkops::cuda::sparse_mla_prefill_fwd(p, stream);
    const int iters = 20;
    CHECK_CUDA(cudaEventRecord(start, stream));
    for (int i = 0; i < iters; ++i) sinkops::cuda::sparse_mla_prefill_fwd(p, stream);
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0.f;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    const double us = 1e3 * ms / iters;
    const double flops = 2.0 * s_q * c.h_q * c.topk * (c.d_qk + d_v);
    std::printf("%-30s %10.1f %10.1f\n", c.name, us, flops / (us * 1e-6) / 1e12);

    cudaFree(q); cudaFree(kv); cudaFree(out); cudaFree(idx); cudaFree(sink); cudaFree(lse); cudaFree(max_logits);
  }
  return 0;
}
