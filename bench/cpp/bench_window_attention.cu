// Microbenchmark of the CUDA window attention kernel (csrc/cuda/window_attention*.cu) through the
// C++ API on the MiMo-V2.5 vision shapes (DESIGN.md §5), bf16, sinks in MiMo's range.
// Build (from the repo root):
//   nvcc -std=c++17 -O3 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a \
//        -Icsrc/include -Icsrc/cuda bench/cpp/bench_window_attention.cu \
//        csrc/cuda/window_attention*.cu -o /tmp/bench_window_attention
// Floor = bytes of q, k, v, out / 4.3 TB/s (measured H200 copy bandwidth). Each timed launch
// follows a 256 MiB memset so L2 starts cold, like triton's do_bench; we report the median.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_common.cuh"
#include "sinkops/cuda_api.h"



struct Case {
  const char* name;
  int batch, seqlen, h_q, h_k, d, left, right;
};

int main() {
  constexpr double kCopyBandwidth = 4.3e12;  // bytes/s, measured on the H200
  const Case cases[] = {
      {"image 1x4096  32/8 d64 (64,64)", 1, 4096, 32, 8, 64, 64, 64},
      {"video 16x1024 32/8 d64 (64,64)", 16, 1024, 32, 8, 64, 64, 64},
      {"video 64x1024 32/8 d64 (64,64)", 64, 1024, 32, 8, 64, 64, 64},
      {"2x2048 16/16 d80 (64,64)      ", 2, 2048, 16, 16, 80, 64, 64},
      {"1x4096 32/8 d128 (-1,-1)      ", 1, 4096, 32, 8, 128, -1, -1},
  };
  const sinkops::SinkMode modes[] = {sinkops::SinkMode::kNone, sinkops::SinkMode::kKey0, sinkops::SinkMode::kNull};
  const char* mode_names[] = {"none", "key0", "null"};

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  const size_t flush_bytes = size_t(256) << 20;
  void* flush;
  CHECK_CUDA(cudaMalloc(&flush, flush_bytes));

  std::printf("%-32s %-5s %9s %9s %9s %8s\n", "case", "sink", "us", "GB/s", "floor us", "x floor");
  for (const Case& c : cases) {
    const int64_t total = int64_t(c.batch) * c.seqlen;
    const int64_t nq = total * c.h_q * c.d, nkv = total * c.h_k * c.d;
    __nv_bfloat16 *q, *k, *v, *out;
    float *lse, *sinks;
    int32_t* cu;
    CHECK_CUDA(cudaMalloc(&q, nq * 2));
    CHECK_CUDA(cudaMalloc(&k, nkv * 2));
    CHECK_CUDA(cudaMalloc(&v, nkv * 2));
    CHECK_CUDA(cudaMalloc(&out, nq * 2));
    CHECK_CUDA(cudaMalloc(&lse, total * c.h_q * 4));
    CHECK_CUDA(cudaMalloc(&sinks, c.h_q * 4));
    CHECK_CUDA(cudaMalloc(&cu, (c.batch + 1) * 4));
    fill_bf16<<<1024, 256, 0, stream>>>(q, nq, 1, 1.7f);
    fill_bf16<<<1024, 256, 0, stream>>>(k, nkv, 2, 1.7f);
    fill_bf16<<<1024, 256, 0, stream>>>(v, nkv, 3, 1.7f);
    std::vector<int32_t> cu_host(c.batch + 1);
    for (int b = 0; b <= c.batch; ++b) cu_host[b] = b * c.seqlen;
    std::vector<float> sink_host(c.h_q);
    for (int h = 0; h < c.h_q; ++h) sink_host[h] = -0.1f + 0.7f * h / c.h_q;  // MiMo range
    CHECK_CUDA(cudaMemcpy(cu, cu_host.data(), cu_host.size() * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(sinks, sink_host.data(), sink_host.size() * 4, cudaMemcpyHostToDevice));

    sinkops::WindowAttentionParams p;
    p.dtype = sinkops::DType::kBFloat16;
    p.q = q; p.k = k; p.v = v; p.out = out; p.lse = lse;
    p.cu_seqlens_q = cu; p.cu_seqlens_k = cu;
    p.q_row_stride = int64_t(c.h_q) * c.d; p.q_head_stride = c.d;
    p.k_row_stride = int64_t(c.h_k) * c.d; p.k_head_stride = c.d;
    p.v_row_stride = int64_t(c.h_k) * c.d; p.v_head_stride = c.d;
    p.out_row_stride = int64_t(c.h_q) * c.d; p.out_head_stride = c.d;
    p.lse_head_stride = total;
    p.total_q = total; p.total_k = total;
    p.batch = c.batch; p.h_q = c.h_q; p.h_k = c.h_k; p.d = c.d; p.d_v = c.d;
    p.max_seqlen_q = c.seqlen; p.max_seqlen_k = c.seqlen;
    p.window_left = c.left; p.window_right = c.right;
    p.scale = 1.f / std::sqrt(float(c.d));
    const double bytes = double(2 * nq + 2 * nkv) * 2;
    const double floor_us = bytes / kCopyBandwidth * 1e6;

    for (int mi = 0; mi < 3; ++mi) {
      p.sink_mode = modes[mi];
      p.sinks = mi == 0 ? nullptr : sinks;
      for (int i = 0; i < 5; ++i) sinkops::cuda::window_attention_fwd(p, stream);  // warm-up
      std::vector<float> times;
      for (int i = 0; i < 30; ++i) {
        CHECK_CUDA(cudaMemsetAsync(flush, i, flush_bytes, stream));
        CHECK_CUDA(cudaEventRecord(start, stream));
        sinkops::cuda::window_attention_fwd(p, stream);
        CHECK_CUDA(cudaEventRecord(stop, stream));
        CHECK_CUDA(cudaEventSynchronize(stop));
        float ms;
        CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
        times.push_back(ms * 1e3f);
      }
      std::sort(times.begin(), times.end());
      const double us = times[times.size() / 2];
      std::printf("%-32s %-5s %9.1f %9.0f %9.1f %8.2f\n", c.name, mode_names[mi], us, bytes / us * 1e-3, floor_us,
                  us / floor_us);
    }
    CHECK_CUDA(cudaFree(q)); CHECK_CUDA(cudaFree(k)); CHECK_CUDA(cudaFree(v)); CHECK_CUDA(cudaFree(out));
    CHECK_CUDA(cudaFree(lse)); CHECK_CUDA(cudaFree(sinks)); CHECK_CUDA(cudaFree(cu));
  }
  CHECK_CUDA(cudaFree(flush));
  return 0;
}
