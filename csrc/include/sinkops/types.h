// Enums shared by every op's params and by every backend's device code (CUDA kernels, the SYCL
// kernels compiled at run time, the CPU emulator). Only <cstdint>: safe in any device compiler.
// The Python side mirrors these values in sinkops/_native.py (checked against the bindings).
#pragma once
#include <cstdint>

namespace sinkops {

// Element type of the attention tensors (q, k, v, out).
enum class DType : int32_t { kFloat16 = 0, kBFloat16 = 1, kFloat32 = 2 };

// How the per-head sink enters the softmax (docs/DESIGN.md §1).
enum class SinkMode : int32_t {
  kNone = 0,  // no sink tensor
  kKey0 = 1,  // add sinks[h] to the logit of the first key of the row's k-segment
  kNull = 2,  // extra logit sinks[h] in the denominator that owns no value
};

// Byte layouts of the paged FP8 KV caches (docs/DESIGN.md §2.3; constants in kv_cache_layout.h).
enum class KvCacheLayout : int32_t { kV4 = 0, kV32 = 1 };

// Which side of the op boundary fills a params field (params_fields.h).
enum class FieldKind : int32_t { kStatic = 0, kCall = 1, kNested = 2 };

}  // namespace sinkops
