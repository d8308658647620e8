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

// A row's terms in the backward (docs/DESIGN.md §6), from the forward's lse (natural log, +inf:
// the row saw nothing or a +inf key0 sink), D = <dO, O> and the lse's gradient.
struct BackwardRow {
  float r;      // 1 - p_sink: P = r Q (the null sink; 1 otherwise), 0 where lse = +inf
  float delta;  // r D - dlse: dX = Q (r dP - delta)
  float dsink;  // the null sink's gradient from this row, -p_sink D (key0: the dX of key 0, summed by the kernel)
};

// sinks[head] * log2(e), or -inf without a sink tensor.
__device__ __forceinline__ float load_log2(const float* sinks, int head) {
  return sinks != nullptr ? sinks[head] * kLog2e : -INFINITY;
}

template <SinkMode kMode>
struct Policy {
  static_assert(kMode != SinkMode::kNone, "no sink = NullSink with s = -inf");
  static constexpr bool kKey0Bias = kMode == SinkMode::kKey0;

  // finish's out_scale alone, bit for bit (kernels asked for no lse skip its log2f: ptxas keeps a
  // log computed in both arms of a branch on whether lse is wanted).
  static __device__ __forceinline__ float out_scale(float m, float l, float sink_log2) {
    if (m == -INFINITY) return 0.f;  // saw no key: out 0, whatever the sink
    float den = l;
    // s = +inf: den = +inf and out_scale = 0, a zero row with a finite lse.
    if constexpr (kMode == SinkMode::kNull) den += exp2f(sink_log2 - m);
    return 1.f / den;
  }

  static __device__ __forceinline__ RowFinish finish(float m, float l, float sink_log2) {
    RowFinish f;
    if (m == -INFINITY) {  // saw no key: out 0, lse +inf, whatever the sink
      f.out_scale = 0.f;
      f.lse = INFINITY;
      f.max_logit = -INFINITY;
      return f;
    }
    f.out_scale = out_scale(m, l, sink_log2);
    f.lse = (m + log2f(l)) * kLn2;  // m = +inf (a +inf key0 sink) gives lse = +inf
    f.max_logit = m * kLn2;
    return f;
  }

  // sink: natural units, -inf without a sink tensor. r = sigmoid(lse - s), p_sink = sigmoid(s - lse):
  // exact at s = -inf (r 1, p_sink 0) and +inf (r 0, p_sink 1).
  static __device__ __forceinline__ BackwardRow backward_row(float lse, float d_row, float g_lse, float sink) {
    BackwardRow b{0.f, 0.f, 0.f};
    if (lse == INFINITY) return b;  // saw nothing (or a +inf key0 sink): no gradient through Q
    float p_sink = 0.f;
    b.r = 1.f;
    if constexpr (kMode == SinkMode::kNull) {
      b.r = 1.f / (1.f + exp2f((sink - lse) * kLog2e));
      p_sink = 1.f / (1.f + exp2f((lse - sink) * kLog2e));
    }
    b.delta = b.r * d_row - g_lse;
    b.dsink = -p_sink * d_row;
    return b;
  }
};

using Key0Sink = Policy<SinkMode::kKey0>;
using NullSink = Policy<SinkMode::kNull>;

}  // namespace sinkops::cuda::sink
