// Host cost of one cuTensorMapEncodeTiled call (window v9's K/V tile maps, two per launch unless
// the last pair is reused: csrc/cuda/sm90/kv_tile_maps.cuh), on the device machine:
//   nvcc -std=c++17 -O2 -Icsrc/cuda -Icsrc/include -I<cute include> tools/prof/tensor_map_cost.cu -o /tmp/tmc && /tmp/tmc
#include <chrono>
#include <cstdio>

#include "sm90/kv_tile_maps.cuh"

int main() {
  void* buf = nullptr;
  if (cudaMalloc(&buf, 64 << 20) != cudaSuccess) return 1;
  CUtensorMap map;
  const int n = 100000;
  bool ok = true;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i)  // a MiMo video K: 16384 rows x 8 heads x 64, boxes of 64 x 1 x 64
    ok &= sinkops::cuda::sm90::encode_tile_map(map, true, static_cast<char*>(buf) + 16 * (i & 1023), 64,
                                               {8, 64, 1}, {16384, 512, 64}, 64);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
  std::printf("cuTensorMapEncodeTiled: %.3f us per call (%s)\n", us, ok ? "ok" : "FAILED");
  return ok ? 0 : 2;
}
