// Does compute-sanitizer racecheck understand named barriers joined by only some warpgroups?
// The pattern of the sm90 sparse prefill (csrc/cuda/sm90/): 3 warpgroups, the third exits early;
// the first two exchange values through shared memory around `bar.sync id, 256` (a full
// barrier of both) and around `bar.arrive` / `bar.sync` (one-way). Every exchange below is
// ordered by the PTX memory model, so a clean tool reports 0 hazards.
//   nvcc -arch=sm_90a -o /tmp/repro named_barrier_repro.cu && compute-sanitizer --tool racecheck /tmp/repro
#include <cstdio>

__device__ __forceinline__ void bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void bar_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }

template <bool kProducerExits>
__global__ void exchange(float* out, int steps) {
  __shared__ float a[128], b[128];
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (wg == 2) {
    if (kProducerExits) return;
    for (int s = 0; s < steps; ++s) __nanosleep(100);
    return;
  }
  float acc = 0.f;
  for (int s = 0; s < steps; ++s) {
    if (wg == 1) {
      a[t] = s + t;            // WG1 writes, then a full barrier of both WGs
      bar_sync(2, 256);
      bar_sync(3, 256);        // WG0 has read a[] before WG1 writes it again
    } else {
      bar_sync(2, 256);
      acc += a[(t + 1) % 128];  // read another thread's value
      bar_sync(3, 256);
    }
    if (wg == 0) {
      b[t] = acc;              // one way: WG0 arrives, WG1 waits
      bar_arrive(4, 256);
      bar_sync(5, 256);
    } else {
      bar_sync(4, 256);
      acc += b[(t + 1) % 128];
      bar_arrive(5, 256);
    }
  }
  out[threadIdx.x] = acc;
}

int main() {
  float* out;
  cudaMalloc(&out, 384 * sizeof(float));
  exchange<true><<<1, 384>>>(out, 4);
  exchange<false><<<1, 384>>>(out, 4);
  printf("repro: %s\n", cudaGetErrorString(cudaDeviceSynchronize()));
  return 0;
}
