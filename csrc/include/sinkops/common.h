// Types shared by every op's params struct. No torch, no CUDA, no SYCL headers here:
// this header is included by the CUDA launchers, the SYCL host code, the pybind11 bindings
// and the C++ microbenchmarks alike.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace sinkops {

// Element type of the attention tensors (q, k, v, out). Values match sinkops/_native.py.
enum class DType : int32_t { kFloat16 = 0, kBFloat16 = 1, kFloat32 = 2 };

// How the per-head sink enters the softmax (DESIGN.md §1).
enum class SinkMode : int32_t {
  kNone = 0,  // no sink tensor
  kKey0 = 1,  // add sinks[h] to the logit of the first key of the row's k-segment
  kNull = 2,  // extra logit sinks[h] in the denominator that owns no value
};

// Byte layouts of the paged FP8 KV caches (DESIGN.md §2.3).
enum class KvCacheLayout : int32_t {
  kV4 = 0,   // per block: block_size x 576 B (448 e4m3 + 64 bf16 rope), then block_size x 8 B e8m0 scales
  kV32 = 1,  // per token, 656 B: 512 e4m3 | 4 x fp32 scale | 64 bf16 rope
};

// The only exception the core throws; the bindings turn it into a Python RuntimeError.
struct Error : std::runtime_error {
  explicit Error(const std::string& what) : std::runtime_error("sinkops: " + what) {}
};

}  // namespace sinkops
