// Microbenchmark of sparse MLA decode over the paged FP8 caches, through the C++ API (cuda_api.h).
// Build: CMakeLists.txt (one executable per bench/cpp/*.cu), or directly:
//   nvcc -std=c++17 -O3 --expt-relaxed-constexpr -arch=sm_90a -Icsrc/include \
//        bench/cpp/bench_sparse_mla_decode.cu csrc/cuda/sparse_mla_decode*.cu -o bench_sparse_mla_decode
// Random cache bytes (fp8 never NaN, valid scales), random valid slots over a cache much larger
// than L2, page block 64, with sink. FLOPs = 2 * b * s_q * h * topk * (d_qk + 512).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "bench_common.cuh"
#include "sinkops/cuda_api.h"
#include "sinkops/kv_cache_layout.h"


namespace {

constexpr double kHbmBytesPerS = 4.8e12;   // H200 HBM3e
constexpr double kBf16DenseFlops = 790e12;  // H200 dense bf16 (wgmma); mma.sync reaches less


// Fills every block with plausible bytes: fp8 values without the NaN code (0x7f / 0xff), e8m0 scales
// near 2^0, fp32 scales 1/64, bf16 rope in (-2, 2).
__global__ void fill_cache_kernel(uint8_t* cache, int64_t num_blocks, int64_t block_stride, int block_size,
                                  bool v4) {
  const int64_t total = num_blocks * block_stride;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t in_block = i % block_stride;
    uint8_t byte = uint8_t(hash_u32(uint64_t(i)));
    using V4 = sinkops::KvLayout<sinkops::KvCacheLayout::kV4>;
    using V32 = sinkops::KvLayout<sinkops::KvCacheLayout::kV32>;
    int64_t tok_off = v4 ? (in_block < int64_t(block_size) * V4::kTokenStride ? in_block % V4::kTokenStride : -1)
                         : in_block % V32::kTokenStride;
    if (v4 && tok_off < 0) {
      byte = uint8_t(124 + byte % 7);  // e8m0 scale bytes (and the pad byte)
    } else if (tok_off < (v4 ? V4::kNope : V32::kNope)) {
      if ((byte & 0x7f) == 0x7f) byte ^= 1;
    } else if (!v4 && tok_off < V32::kRopeOffset) {
      const uint32_t bits = 0x3c800000u;  // 1/64 as float32
      byte = uint8_t(bits >> (8 * ((tok_off - 512) % 4)));
    } else {
      // bf16 rope, little-endian: high byte = sign + exponent around 2^0.
      const bool high = ((tok_off - (v4 ? V4::kRopeOffset : V32::kRopeOffset)) % 2) == 1;
      if (high) byte = uint8_t((byte & 0x80) | 0x3f);
    }
    cache[i] = byte;
  }
}

__global__ void fill_bf16_kernel(uint16_t* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint32_t h = hash_u32(uint64_t(i) + 0x9e3779b97f4a7c15ull);
    x[i] = uint16_t((h & 0x807f) | 0x3f00);  // |x| in [0.5, 1)
  }
}

struct Case {
  const char* name;
  sinkops::KvCacheLayout layout;
  int b, s_q, h_q, topk;
  double peer_us;  // FlashMLA on the same H200 (DESIGN.md §5), 0 if none
};

void run_case(const Case& c) {
  const bool v4 = c.layout == sinkops::KvCacheLayout::kV4;
  const sinkops::KvLayoutInfo layout = sinkops::kv_layout_info(c.layout);
  const int d_qk = layout.d_qk;
  const int block_size = 64;
  const int64_t num_blocks = 8192;  // 512 Ki tokens: ~300 MB, far beyond L2
  const int64_t bpt = layout.bytes_per_token;
  // v4 blocks are padded to a multiple of the 576-byte token stride, as the serving stacks allocate them.
  constexpr int64_t kV4Stride = sinkops::KvLayout<sinkops::KvCacheLayout::kV4>::kTokenStride;
  const int64_t block_stride = v4 ? (block_size * bpt + kV4Stride - 1) / kV4Stride * kV4Stride : block_size * bpt;

  uint8_t* cache;
  CHECK_CUDA(cudaMalloc(&cache, num_blocks * block_stride));
  fill_cache_kernel<<<1024, 256>>>(cache, num_blocks, block_stride, block_size, v4);
  const int64_t q_elems = int64_t(c.b) * c.s_q * c.h_q * d_qk;
  uint16_t* q;
  CHECK_CUDA(cudaMalloc(&q, q_elems * 2));
  fill_bf16_kernel<<<1024, 256>>>(q, q_elems);

  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> slot(0, int32_t(num_blocks * block_size - 1));
  std::vector<int32_t> idx_host(size_t(c.b) * c.s_q * c.topk);
  for (auto& v : idx_host) v = slot(rng);
  int32_t* idx;
  CHECK_CUDA(cudaMalloc(&idx, idx_host.size() * 4));
  CHECK_CUDA(cudaMemcpy(idx, idx_host.data(), idx_host.size() * 4, cudaMemcpyHostToDevice));
  std::vector<float> sink_host(c.h_q);
  for (int h = 0; h < c.h_q; ++h) sink_host[h] = -2.2f + 4.7f * float(h) / float(c.h_q);
  float* sink;
  CHECK_CUDA(cudaMalloc(&sink, c.h_q * 4));
  CHECK_CUDA(cudaMemcpy(sink, sink_host.data(), c.h_q * 4, cudaMemcpyHostToDevice));
  void* out;
  float* lse;
  CHECK_CUDA(cudaMalloc(&out, int64_t(c.b) * c.s_q * c.h_q * 512 * 2));
  CHECK_CUDA(cudaMalloc(&lse, int64_t(c.b) * c.s_q * c.h_q * 4));

  sinkops::SparseMlaDecodeParams p;
  p.layout = c.layout;
  p.q = q;
  p.q_head_stride = d_qk;
  p.q_row_stride = int64_t(c.h_q) * d_qk;
  p.q_batch_stride = int64_t(c.s_q) * p.q_row_stride;
  p.pool.cache = cache;
  p.pool.block_stride = block_stride;
  p.pool.num_blocks = num_blocks;
  p.pool.block_size = block_size;
  p.pool.indices = idx;
  p.pool.indices_row_stride = c.topk;
  p.pool.indices_batch_stride = int64_t(c.s_q) * c.topk;
  p.pool.topk = c.topk;
  p.attn_sink = sink;
  p.out = out;
  p.lse = lse;
  p.b = c.b;
  p.s_q = c.s_q;
  p.h_q = c.h_q;
  p.d_qk = d_qk;
  p.d_v = 512;
  p.sm_scale = 1.0f / 24.0f;
  p.workspace_bytes = sinkops::cuda::sparse_mla_decode_plan(p);  // sets p.num_splits, p.tiles_per_split
  if (p.workspace_bytes > 0) CHECK_CUDA(cudaMalloc(&p.workspace, p.workspace_bytes));

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  for (int i = 0; i < 10; ++i) sinkops::cuda::sparse_mla_decode_fwd(p, stream);
  CHECK_CUDA(cudaStreamSynchronize(stream));
  // Time a CUDA graph of `iters` launches: the per-launch host overhead is not the kernel's latency.
  const int iters = 50;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < iters; ++i) sinkops::cuda::sparse_mla_decode_fwd(p, stream);
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CHECK_CUDA(cudaGraphLaunch(exec, stream));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  float best_ms = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    CHECK_CUDA(cudaEventRecord(start, stream));
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    best_ms = ms < best_ms ? ms : best_ms;
  }
  const double us = 1e3 * best_ms / iters;
  const double flops = 2.0 * c.b * c.s_q * c.h_q * double(c.topk) * (d_qk + 512);
  const double bytes = double(c.b) * c.s_q * c.topk * bpt + double(q_elems) * 2 + double(c.b) * c.s_q * c.h_q * 1024;
  const double floor_us = 1e6 * (bytes / kHbmBytesPerS > flops / kBf16DenseFlops ? bytes / kHbmBytesPerS
                                                                                  : flops / kBf16DenseFlops);
  std::printf("| %-32s | %8.1f | %7.1f | %8.1f | %s%7.1f |\n", c.name, us, flops / (us * 1e-6) / 1e12, floor_us,
              c.peer_us > 0 ? "" : " ", c.peer_us);

  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  CHECK_CUDA(cudaStreamDestroy(stream));
  cudaFree(cache);
  cudaFree(q);
  cudaFree(idx);
  cudaFree(sink);
  cudaFree(out);
  cudaFree(lse);
  if (p.workspace) cudaFree(p.workspace);
}

}  // namespace

int main() {
  int device = 0, num_sms = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  CHECK_CUDA(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device));
  using L = sinkops::KvCacheLayout;
  const Case cases[] = {
      {"V4 b128 s_q2 h128 topk1152", L::kV4, 128, 2, 128, 1152, 194.0},
      {"V4 b128 s_q1 h64 topk640", L::kV4, 128, 1, 64, 640, 47.5},
      {"V4 b16 s_q1 h64 topk640", L::kV4, 16, 1, 64, 640, 22.3},
      {"V4 b1 s_q1 h64 topk640", L::kV4, 1, 1, 64, 640, 16.9},
      {"V4 b1 s_q1 h8 topk640", L::kV4, 1, 1, 8, 640, 0},
      {"v32 b128 s_q2 h128 topk2048", L::kV32, 128, 2, 128, 2048, 0},
      {"v32 b64 s_q1 h64 topk2048", L::kV32, 64, 1, 64, 2048, 0},
      {"v32 b1 s_q1 h128 topk2048", L::kV32, 1, 1, 128, 2048, 0},
  };
  std::printf("sparse MLA decode, %d SMs; floor = max(gathered bytes / 4.8 TB/s, FLOPs / 790 TFLOP/s)\n", num_sms);
  std::printf("| %-32s | %8s | %7s | %8s | %8s |\n", "case", "us", "TFLOP/s", "floor us", "FlashMLA");
  for (const Case& c : cases) run_case(c);
  return 0;
}
