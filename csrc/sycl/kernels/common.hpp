// Device helpers shared by every sinkops SYCL kernel. This file is NOT compiled by the host
// compiler: tools/build_sycl.py embeds it (with the other files in this folder) into the host
// module as a string, and the kernel_compiler extension compiles it at run time for the device.
#include <sycl/sycl.hpp>

#include <limits>

// The params structs and the KV layouts are the host's own headers (params_fields.h), handed
// to the runtime compiler as include files (kernel_bundle_cache.cpp).
#include "sinkops/kv_cache_layout.h"
#include "sinkops/sparse_mla_params.h"
#include "sinkops/window_attention_params.h"

namespace syclexp = sycl::ext::oneapi::experimental;
using bf16 = sycl::ext::oneapi::bfloat16;

namespace sinkops_sycl {

// Every kernel runs with sub-groups of 16 (Intel GPUs: 16 or 32; the CPU device honours 16).
// A (query row, head) pair is owned by one sub-group; its vectors are striped over the lanes
// (lane l holds channels l, l + 16, ...) so a dot product is one sub-group reduction.
constexpr int kSubGroup = 16;
constexpr int kSubGroupsPerWorkGroup = 16;
constexpr int kWorkGroupSize = kSubGroup * kSubGroupsPerWorkGroup;
constexpr float kInf = std::numeric_limits<float>::infinity();

enum SinkModeId : int {  // sinkops::SinkMode as plain ints
  kSinkNone = static_cast<int>(sinkops::SinkMode::kNone),
  kSinkKey0 = static_cast<int>(sinkops::SinkMode::kKey0),
  kSinkNull = static_cast<int>(sinkops::SinkMode::kNull),
};

// Segment b of a packed tensor of `total` rows: [lo, lo + len), clamped so that any int32
// cu_seqlens values stay inside the tensor (a decreasing segment is empty).
inline void segment_bounds(const int* cu, int b, int64_t total, int64_t& lo, int64_t& len) {
  int64_t a = cu[b], e = cu[b + 1];
  a = a < 0 ? 0 : (a > total ? total : a);
  e = e < a ? a : (e > total ? total : e);
  lo = a;
  len = e - a;
}

inline float to_float(float x) { return x; }
inline float to_float(sycl::half x) { return static_cast<float>(x); }
inline float to_float(bf16 x) { return static_cast<float>(x); }
template <typename T> inline T from_float(float x) { return static_cast<T>(x); }

// Online softmax of one (row, head) pair; acc holds this lane's stripe of the value sum.
template <int kLaneElems>
struct OnlineSoftmax {
  float m = -kInf;  // running max of the logits seen
  float l = 0.0f;   // running sum of exp(x - m)
  float acc[kLaneElems];

  void init() {
    for (int t = 0; t < kLaneElems; ++t) acc[t] = 0.0f;
  }
  // x must be finite: the callers route +-inf logits (only possible through a key0 sink) elsewhere.
  void add(float x, const float* value_row, int d_v, int lane) {
    if (x > m) {
      const float c = sycl::exp(m - x);  // exp(-inf) = 0 on the first key
      l *= c;
      for (int t = 0; t < kLaneElems; ++t) acc[t] *= c;
      m = x;
    }
    const float p = sycl::exp(x - m);
    l += p;
    for (int t = 0; t < kLaneElems; ++t) {
      const int c = lane + t * kSubGroup;
      if (c < d_v) acc[t] += p * value_row[c];
    }
  }
};

// Dot product of the lane-striped query with a key row in local memory, summed over the sub-group.
template <int kLaneElems>
inline float subgroup_dot(sycl::sub_group sg, const float (&q)[kLaneElems], const float* key_row,
                          int d, int lane) {
  float partial = 0.0f;
  for (int t = 0; t < kLaneElems; ++t) {
    const int c = lane + t * kSubGroup;
    if (c < d) partial += q[t] * key_row[c];
  }
  return sycl::reduce_over_group(sg, partial, sycl::plus<float>());
}

// Writes the normalized output stripe and returns the lse (DESIGN.md §1): empty rows give 0 and
// +inf whatever the sink; a null sink of -inf takes exactly the no-sink path (bitwise no-op);
// +inf gives an all-zero row with a finite lse.
template <typename OutT, int kLaneElems>
inline float finalize_row(const OnlineSoftmax<kLaneElems>& st, bool null_sink, float sink,
                          OutT* out_row, int d_v, int lane) {
  if (st.m == -kInf) {
    for (int t = 0; t < kLaneElems; ++t) {
      const int c = lane + t * kSubGroup;
      if (c < d_v) out_row[c] = from_float<OutT>(0.0f);
    }
    return kInf;
  }
  float num_scale = 1.0f, denom = st.l;
  if (null_sink && sink > -kInf) {
    if (sink == kInf) {
      num_scale = 0.0f;
    } else {
      const float mm = sycl::fmax(st.m, sink);
      num_scale = sycl::exp(st.m - mm);
      denom = st.l * num_scale + sycl::exp(sink - mm);
    }
  }
  for (int t = 0; t < kLaneElems; ++t) {
    const int c = lane + t * kSubGroup;
    if (c < d_v) out_row[c] = from_float<OutT>(num_scale == 0.0f ? 0.0f : st.acc[t] * num_scale / denom);
  }
  return st.m + sycl::log(st.l);
}

// Decoding of the FP8 cache bytes (DESIGN.md §2.3).
inline float e4m3_to_float(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 0xF, man = b & 0x7;
  float v;
  if (exp == 0xF && man == 0x7) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    v = sycl::ldexp(static_cast<float>(man), -9);  // subnormal: man/8 * 2^-6
  } else {
    v = sycl::ldexp(1.0f + static_cast<float>(man) * 0.125f, exp - 7);
  }
  return sign ? -v : v;
}
inline float e8m0_to_float(uint8_t b) { return sycl::ldexp(1.0f, static_cast<int>(b) - 127); }
inline float bf16_bytes_to_float(const uint8_t* p) {
  const uint32_t bits = (static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8)) << 16;
  return sycl::bit_cast<float>(bits);
}
inline float f32_bytes_to_float(const uint8_t* p) {
  const uint32_t bits = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                        (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
  return sycl::bit_cast<float>(bits);
}

}  // namespace sinkops_sycl
