// The sink modes as policy types (docs/DESIGN.md §1), shared by every CUDA kernel:
//   Key0Sink: the window kernel adds the sink to the logit of its segment's key 0 (kKey0Bias)
//             and finishes rows like a plain softmax;
//   NullSink: one more term 2^(s - m) in the denominator when a row is finished. "No sink" is
//             NullSink with s = -inf: 2^(-inf) adds exactly +0, so having no sink and a -inf sink
//             run the same instructions and give bitwise the same result.
// A row's state at the end of an online softmax, in log2 units: m = max_j x_j log2(e) (-inf when
// the row saw no key), l = sum_j 2^(x_j log2(e) - m). Header-only, torch-free.
#pragma once
#include <cuda_runtime.h>

#include <cmath>

#include "sinkops/types.h"

namespace sinkops::cuda::sink {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

struct RowFinish {
  float out_scale;  // multiply the un-normalized O by this; 0 for rows that saw no key
  float lse;        // natural log, sink excluded; +inf for rows that saw no key
  float max_logit;  // natural units; -inf for rows that saw no key
};

// sinks[head] * log2(e), or -inf without a sink tensor.
__device__ __forceinline__ float load_log2(const float* sinks, int head) {
  return sinks != nullptr ? sinks[head] * kLog2e : -INFINITY;
}

template <SinkMode kMode>
struct Policy {
  static_assert(kMode != SinkMode::kNone, "no sink = NullSink with s = -inf");
  static constexpr bool kKey0Bias = kMode == SinkMode::kKey0;

  static __device__ __forceinline__ RowFinish finish(float m, float l, float sink_log2) {
    RowFinish f;
    if (m == -INFINITY) {  // saw no key: out 0, lse +inf, whatever the sink
      f.out_scale = 0.f;
      f.lse = INFINITY;
      f.max_logit = -INFINITY;
      return f;
    }
    float den = l;
    // s = +inf: den = +inf and out_scale = 0, a zero row with a finite lse.
    if constexpr (kMode == SinkMode::kNull) den += exp2f(sink_log2 - m);
    f.out_scale = 1.f / den;
    f.lse = (m + log2f(l)) * kLn2;  // m = +inf (a +inf key0 sink) gives lse = +inf
    f.max_logit = m * kLn2;
    return f;
  }
};

using Key0Sink = Policy<SinkMode::kKey0>;
using NullSink = Policy<SinkMode::kNull>;

}  // namespace sinkops::cuda::sink
