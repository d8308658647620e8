// Does compute-sanitizer racecheck keep shared-memory accesses apart across CTAs that run one
// after another on an SM? The pattern of the sm90 FP8 decode's row_scale hand-over
// (csrc/cuda/sm90/sparse_mla_decode_sm90.cuh): WG0 writes a per-row value and `bar.arrive`s,
// WG1 `bar.sync`s and reads it; from the second block on WG0 first waits until WG1 has read the
// previous one (`bar.arrive` by WG1, `bar.sync` by WG0). One CTA per SM (the shared memory asks
// for it); every access below is ordered within its CTA (PTX: accesses before bar.arrive are
// performed for the threads that complete the matching bar.sync), so a clean tool reports 0
// hazards for any grid. Measured on an H100 (2026-12-06, bench/NOTES.md "Prefill v1.5 measured"):
// 1 hazard at grid 12 and 1 at grid 480, so racecheck does not carry state across CTAs; it flags
// the one-way bar.arrive -> bar.sync hand-over itself, which is what the prefill's and decode's
// reported sites are. Run with a grid below and above the SM count:
//   nvcc -arch=sm_90a -o /tmp/mw multi_wave_repro.cu && compute-sanitizer --tool racecheck /tmp/mw 12
//   compute-sanitizer --tool racecheck /tmp/mw 480
#include <cstdio>
#include <cstdlib>

__device__ __forceinline__ void bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void bar_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }

constexpr int kSmemBytes = 200 * 1024;  // > half of an SM's shared memory: one CTA per SM

__global__ void __launch_bounds__(384, 1) hand_over(float* out, int blocks) {
  extern __shared__ float smem[];
  float* row_scale = smem + 50000;  // somewhere past the middle, as in the decode
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (wg == 2) return;  // the producer warpgroup has nothing to do here
  float acc = 0.f;
  for (int blk = 0; blk < blocks; ++blk) {
    if (wg == 0) {
      if (blk > 0) bar_sync(2, 256);  // WG1 has read the previous block's values
      if (t % 4 == 0) row_scale[t / 4] = blk + t + blockIdx.x;
      bar_arrive(1, 256);
    } else {
      bar_sync(1, 256);
      acc += row_scale[(t / 4 + 1) % 32];
      if (blk + 1 < blocks) bar_arrive(2, 256);
    }
  }
  bar_sync(3, 256);
  out[blockIdx.x * 256 + threadIdx.x] = acc;
}

int main(int argc, char** argv) {
  const int grid = argc > 1 ? atoi(argv[1]) : 480;
  float* out;
  cudaMalloc(&out, grid * 256 * sizeof(float));
  cudaFuncSetAttribute(hand_over, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  hand_over<<<grid, 384, kSmemBytes>>>(out, 3);
  printf("multi-wave repro, grid %d: %s\n", grid, cudaGetErrorString(cudaDeviceSynchronize()));
  return 0;
}
